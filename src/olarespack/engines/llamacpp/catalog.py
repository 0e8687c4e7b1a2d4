"""The rule ids llama.cpp's own checks report (registered into core/rule_catalog.py by engines/__init__.py):
what each protects against and where it comes from."""

from __future__ import annotations

from olarespack.core.rule_catalog import OWN, Rule

RULES: dict[str, Rule] = {
    "ubatch-batch": Rule(
        "engine", "llama.cpp ubatch <= batch: a warning (llama_context caps it and boots)", "llama.cpp silently caps it"
    ),
    "llamacpp-mtp-layers": Rule(
        "engine",
        "warning: --spec-type draft-mtp without a drafter file drafts with the model's own MTP layers, which its "
        "model data names",
        "llama.cpp b11434 llama_init_from_model: context type MTP requested but model doesn't contain MTP layers",
    ),
    "quantized-v-cache": Rule("engine", "a quantized V cache has flash attention on", "llama.cpp refuses to start"),
    "llamacpp-cache-type": Rule(
        "engine",
        "KV cache types are ones the image's llama.cpp build knows",
        "llama.cpp (or the fork, engines/llamacpp/images.yaml) refuses to start",
    ),
    "llamacpp-spec-type": Rule(
        "engine",
        "--spec-type is one the image knows, from its build on, with its drafter",
        "llama.cpp and its forks (engines/llamacpp/images.yaml)",
    ),
    "llamacpp-release-tag": Rule(
        "engine",
        "a llama.cpp release tag (v0.3.0) runs a build the release tables pin; else the spec names the build (-b<N>)",
        "llama.cpp docs/release.md and make-release.yml: a release re-tags one nightly build's images",
    ),
    "chat-template-path": Rule(
        "engine",
        "a chat template is mounted on a path of its own",
        f"{OWN}: mounted over a model file or in a scratch folder, it hides one or the other",
    ),
    "llamacpp-image-family": Rule(
        "engine",
        "the image belongs to a llama.cpp family olarespack knows (advice)",
        f"{OWN}: a custom build's flags pass through unchecked",
    ),
    "gemma4-mmproj-bf16": Rule(
        "engine",
        "Gemma 4 audio models (E2B, E4B) use the BF16 projector",
        "F16/Q8_0 give repetitive output (seed post 1)",
    ),
    "mmproj-width": Rule(
        "engine",
        "the projector writes embeddings as wide as the model's (GGUF headers)",
        "llama.cpp tools/mtmd/mtmd.cpp mtmd_context: clip_n_mmproj_embd != llama_model_n_embd_inp "
        'is "mismatch between text model and mmproj"; llama-server does not start',
    ),
    "drafter-vocab": Rule(
        "engine",
        "a llama.cpp draft model's vocabulary is within 128 tokens of the target's",
        "llama.cpp common/speculative.cpp common_speculative_are_compatible: b9101 translates "
        "every draft; b9113 on refuse it and serve without speculative decoding",
    ),
}
