"""Engine command lines built from a spec (pure).

The values go straight into the container's args, not through a ConfigMap: a changed arg changes the pod
template, so `helm upgrade` restarts the engine with it (a ConfigMap edit would not), and a rendered diff
shows the change where it runs. The same list is what the descriptions cite, so text and args cannot drift.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from olarespack.spec import LlamaCppEngine, VllmEngine

MODEL_DIR = "/models"
HF_HOME = f"{MODEL_DIR}/huggingface"
VLLM_PORT = 8000
LLAMACPP_PORT = 8080


@dataclass(frozen=True)
class Arg:
    """One command-line item: a flag, a value, or a flag and its value."""

    flag: str | None = None
    value: str | None = None

    def container_items(self) -> list[str]:
        """As written in the Deployment, where Kubernetes would expand a literal $(NAME)."""
        return [x for x in (self.flag, None if self.value is None else kubernetes_literal(self.value))
                if x is not None]

    def effective_items(self) -> list[str]:
        """As the process receives them, after Kubernetes expanded $(KEY)."""
        return [x for x in (self.flag, self.value) if x is not None]


def kubernetes_literal(value: str) -> str:
    """Kubernetes expands $(NAME) in args and env values (from the container's other env vars, the HF token
    among them); a spec's text is literal, so every $( is written $$(."""
    return value.replace("$(", "$$(")


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _switch(flag: str, enabled: bool | None) -> list[Arg]:
    """--flag / --no-flag for a tri-state setting; nothing when the spec leaves it to the engine."""
    if enabled is None:
        return []
    return [Arg(flag if enabled else flag.replace("--", "--no-", 1))]


def _given(flag: str, value: object) -> list[Arg]:
    """The flag when the spec sets the value: with it for a value, alone for `true`."""
    if value is None or value is False or value == "":
        return []
    return [Arg(flag)] if value is True else [Arg(flag, str(value))]


def vllm_args(engine: VllmEngine) -> list[Arg]:
    speculative = engine.speculative.model_dump(exclude_none=True) if engine.speculative else None
    modalities = dict(sorted(engine.limit_mm_per_prompt.items())) if engine.limit_mm_per_prompt else None
    return [
        Arg(value=engine.model),
        Arg("--served-model-name", engine.served_model_name),
        Arg("--host", "0.0.0.0"),
        Arg("--port", str(VLLM_PORT)),
        Arg("--max-model-len", str(engine.context_length)),
        Arg("--gpu-memory-utilization", f"{engine.gpu_memory_utilization:g}"),
        *_given("--revision", engine.revision),
        *_given("--max-num-seqs", engine.max_num_seqs),
        *_given("--max-num-batched-tokens", engine.max_num_batched_tokens),
        *_given("--attention-backend", engine.attention_backend),
        *_given("--speculative-config", speculative and _compact_json(speculative)),
        Arg("--kv-cache-dtype", engine.kv_cache_dtype),
        Arg("--dtype", engine.dtype),
        *_given("--trust-remote-code", engine.trust_remote_code),
        Arg("--download-dir", HF_HOME),
        *_switch("--enable-prefix-caching", engine.enable_prefix_caching),
        *_switch("--enable-chunked-prefill", engine.enable_chunked_prefill),
        *_given("--limit-mm-per-prompt", modalities and _compact_json(modalities)),
        *_given("--enable-auto-tool-choice", bool(engine.tool_call_parser)),
        *_given("--tool-call-parser", engine.tool_call_parser),
        *_given("--reasoning-parser", engine.reasoning_parser),
        *(Arg(value=extra) for extra in engine.extra_args),
    ]


def gguf_dir(engine: LlamaCppEngine) -> str:
    """Per-repository folder, so two repos' identically named files (mmproj-BF16.gguf) never collide."""
    return f"{MODEL_DIR}/{engine.model.repo.replace('/', '--')}"


def llamacpp_args(engine: LlamaCppEngine) -> list[Arg]:
    folder = gguf_dir(engine)
    return [
        Arg("--host", "0.0.0.0"),
        Arg("--port", str(LLAMACPP_PORT)),
        Arg("--model", f"{folder}/{engine.model.file}"),
        *_given("--mmproj", engine.model.mmproj and f"{folder}/{engine.model.mmproj}"),
        Arg("--alias", engine.alias),
        Arg("--ctx-size", str(engine.ctx_size)),
        Arg("--n-gpu-layers", str(engine.n_gpu_layers)),
        *_given("--threads", engine.threads),
        *_given("--batch-size", engine.batch_size),
        *_given("--ubatch-size", engine.ubatch_size),
        *_given("--parallel", engine.parallel),
        *_given("--cache-type-k", engine.cache_type_k),
        *_given("--cache-type-v", engine.cache_type_v),
        *_given("--mlock", engine.mlock),
        Arg("--flash-attn", engine.flash_attn),
        *_given("--jinja", engine.jinja),
        *_switch("--context-shift", engine.context_shift),
        *(Arg(value=extra) for extra in engine.extra_args),
    ]


def engine_args(engine: VllmEngine | LlamaCppEngine) -> list[Arg]:
    return vllm_args(engine) if isinstance(engine, VllmEngine) else llamacpp_args(engine)


def container_args(args: list[Arg]) -> list[str]:
    return [item for a in args for item in a.container_items() if item is not None]


def effective_args(args: list[Arg]) -> list[str]:
    return [item for a in args for item in a.effective_items()]


def shell_join(items: list[str]) -> str:
    """A command line a person can paste: JSON-ish values single-quoted, as in the seed posts."""
    return " ".join(f"'{i}'" if re.search(r"[^A-Za-z0-9_./:=,@+-]", i) else i for i in items)


def engine_version(engine: VllmEngine | LlamaCppEngine) -> str | None:
    """The engine release inside the image: explicit, or read from a vX.Y.Z / bNNNN tag."""
    if isinstance(engine, VllmEngine):
        if engine.version:
            return engine.version
        match = re.search(r":v(\d+\.\d+\.\d+)(?:-|$)", engine.image)
        return match.group(1) if match else None
    match = re.search(r"-(b\d+)$", engine.image)
    return match.group(1) if match else None


# Flags the typed spec fields (or the chart itself) already set: an extra arg repeating one of them would
# either be ignored or silently win, depending on the engine's parser.
VLLM_TYPED_FLAGS = {
    "--served-model-name": "engine.served_model_name", "--model": "engine.model", "--host": "chart",
    "--port": "chart", "--max-model-len": "engine.max_model_len",
    "--gpu-memory-utilization": "engine.gpu_memory_utilization", "--revision": "engine.revision",
    "--max-num-seqs": "engine.max_num_seqs", "--max-num-batched-tokens": "engine.max_num_batched_tokens",
    "--attention-backend": "engine.attention_backend", "--speculative-config": "engine.speculative",
    "--kv-cache-dtype": "engine.kv_cache_dtype", "--dtype": "engine.dtype",
    "--trust-remote-code": "engine.trust_remote_code", "--download-dir": "chart",
    "--enable-prefix-caching": "engine.enable_prefix_caching",
    "--no-enable-prefix-caching": "engine.enable_prefix_caching",
    "--enable-chunked-prefill": "engine.enable_chunked_prefill",
    "--no-enable-chunked-prefill": "engine.enable_chunked_prefill",
    "--limit-mm-per-prompt": "engine.limit_mm_per_prompt", "--tool-call-parser": "engine.tool_call_parser",
    "--enable-auto-tool-choice": "engine.tool_call_parser", "--reasoning-parser": "engine.reasoning_parser",
}
LLAMACPP_TYPED_FLAGS = {
    "--host": "chart", "--port": "chart", "-m": "engine.model", "--model": "engine.model",
    "-mm": "engine.model.mmproj", "--mmproj": "engine.model.mmproj", "-a": "engine.alias", "--alias": "engine.alias",
    "-c": "engine.ctx_size", "--ctx-size": "engine.ctx_size", "-ngl": "engine.n_gpu_layers",
    "--n-gpu-layers": "engine.n_gpu_layers", "--gpu-layers": "engine.n_gpu_layers", "-fa": "engine.flash_attn",
    "--flash-attn": "engine.flash_attn", "-ctk": "engine.cache_type_k", "--cache-type-k": "engine.cache_type_k",
    "-ctv": "engine.cache_type_v", "--cache-type-v": "engine.cache_type_v", "-b": "engine.batch_size",
    "--batch-size": "engine.batch_size", "-ub": "engine.ubatch_size", "--ubatch-size": "engine.ubatch_size",
    "-np": "engine.parallel", "--parallel": "engine.parallel", "-t": "engine.threads", "--threads": "engine.threads",
    "--jinja": "engine.jinja", "--mlock": "engine.mlock", "--context-shift": "engine.context_shift",
    "--no-context-shift": "engine.context_shift",
}
