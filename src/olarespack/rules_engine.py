"""Engine-flag rules: what vLLM 0.20/0.21 or llama.cpp would refuse at boot, or run badly, found from the
spec before a box does. Pure: a spec in, Problems out."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from olarespack import engines
from olarespack.errors import Problem
from olarespack.spec import AppSpec, LlamaCppEngine, VllmEngine

# Methods that draft with a separate model (or MTP head) and so need speculative.model.
NEEDS_DRAFT_MODEL = frozenset({
    "mtp", "gemma4_mtp", "deepseek_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "mimo_mtp", "glm4_moe_mtp",
    "ernie_mtp", "longcat_flash_mtp", "dflash", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model",
})
MTP_ALIASES = frozenset(m for m in NEEDS_DRAFT_MODEL if m.endswith("_mtp"))
# The first vLLM release that knows a speculative method (only those that arrived in the versions we track).
METHOD_SINCE = {"gemma4_mtp": (0, 21, 0), "dflash": (0, 20, 0)}
DFLASH_MAX_TOKENS = 15  # DFlash drafters are trained with blocks of 16 positions
FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "edge", "dev"})
# Flags that make vLLM size every sliding-window layer for the full context (about 11x more KV on Gemma 4).
HYBRID_KV_BREAKERS = ("--disable-hybrid-kv-cache-manager", "--kv-transfer-config")
FULL_PRECISION_CACHE = frozenset({"f32", "f16", "bf16"})

Rule = Callable[[str, AppSpec], Iterator[Problem]]
RULES: list[Rule] = []


def rule(func: Rule) -> Rule:
    RULES.append(func)
    return func


def engine_problems(file: str, spec: AppSpec) -> list[Problem]:
    return [problem for check in RULES for problem in check(file, spec)]


def vllm_release(engine: VllmEngine) -> tuple[int, int, int] | None:
    version = engines.engine_version(engine)
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def is_gemma4(model: str) -> bool:
    return bool(re.search(r"gemma-?4", model, re.IGNORECASE))


@rule
def floating_image_tag(file: str, spec: AppSpec) -> Iterator[Problem]:
    images = [("engine.image", spec.engine.image)]
    if isinstance(spec.engine, LlamaCppEngine) and spec.engine.downloader_image:
        images.append(("engine.downloader_image", spec.engine.downloader_image))
    for path, image in images:
        if "@sha256:" in image:
            continue
        name = image.rsplit("/", 1)[-1]
        tag = name.split(":", 1)[1] if ":" in name else None
        if tag is None or tag in FLOATING_TAGS:
            yield Problem(file, path, f"{image!r} has {'no tag' if tag is None else f'the floating tag {tag!r}'}; "
                          "the box would run whatever the registry serves that day",
                          "pin a release tag (e.g. vllm/vllm-openai:v0.21.0-cu129) or a digest",
                          rule="image-floating-tag")


@rule
def duplicated_typed_flag(file: str, spec: AppSpec) -> Iterator[Problem]:
    typed = engines.VLLM_TYPED_FLAGS if isinstance(spec.engine, VllmEngine) else engines.LLAMACPP_TYPED_FLAGS
    for i, arg in enumerate(spec.engine.extra_args):
        flag = arg.split("=", 1)[0]
        if flag in typed:
            owner = typed[flag]
            fix = "remove it: the chart sets it" if owner == "chart" else f"remove it and set {owner} instead"
            yield Problem(file, f"engine.extra_args[{i}]", f"{flag} duplicates a typed field", fix,
                          rule="extra-arg-duplicate")


@rule
def speculative_method(file: str, spec: AppSpec) -> Iterator[Problem]:
    engine = spec.engine
    if not isinstance(engine, VllmEngine) or engine.speculative is None:
        return
    method = engine.speculative.method
    if method in NEEDS_DRAFT_MODEL and engine.speculative.model is None:
        yield Problem(file, "engine.speculative.model", f"{method} needs a draft model (without one vLLM "
                      "drafts with the target itself)", "set the drafter's repository", rule="spec-draft-model")
    release = vllm_release(engine)
    since = METHOD_SINCE.get(method)
    if since and release is None:
        yield Problem(file, "engine.version", f"cannot tell whether the image's vLLM knows {method}",
                      "set engine.version to the vLLM release inside the image", rule="spec-method-version",
                      severity="warning")
    elif since and release is not None and release < since:
        yield Problem(file, "engine.speculative.method",
                      f"{method} needs vLLM >= {'.'.join(map(str, since))}; the image has "
                      f"{'.'.join(map(str, release))}", "use a newer image or another method",
                      rule="spec-method-version")
    if method in MTP_ALIASES:
        yield Problem(file, "engine.speculative.method", f"{method} is an alias that vLLM rewrites to mtp",
                      "fine as is; write mtp to match what vLLM logs", rule="spec-mtp-alias", severity="warning")
    if method == "dflash" and engine.speculative.num_speculative_tokens > DFLASH_MAX_TOKENS:
        yield Problem(file, "engine.speculative.num_speculative_tokens",
                      f"must be <= {DFLASH_MAX_TOKENS} for dflash drafters (trained with blocks of 16)",
                      f"use {DFLASH_MAX_TOKENS} or less (8 is the measured optimum on the RTX 5090 Laptop)",
                      rule="dflash-tokens")


@rule
def tool_choice(file: str, spec: AppSpec) -> Iterator[Problem]:
    engine = spec.engine
    if isinstance(engine, VllmEngine) and "--enable-auto-tool-choice" in engine.extra_args \
            and not engine.tool_call_parser:
        yield Problem(file, "engine.tool_call_parser", "--enable-auto-tool-choice needs a tool-call parser "
                      "(vLLM refuses to start)", "set engine.tool_call_parser (e.g. gemma4) and drop the extra arg",
                      rule="tool-parser")


@rule
def batched_tokens(file: str, spec: AppSpec) -> Iterator[Problem]:
    engine = spec.engine
    if not isinstance(engine, VllmEngine) or engine.max_num_batched_tokens is None:
        return
    seqs = engine.max_num_seqs or 1
    slots = 1 + (engine.speculative.num_speculative_tokens if engine.speculative else 0)
    if engine.max_num_batched_tokens < seqs * slots:
        yield Problem(file, "engine.max_num_batched_tokens",
                      f"{engine.max_num_batched_tokens} cannot schedule {seqs} sequence(s) x {slots} token(s) "
                      "per step (decode plus speculative slots)", f"use at least {seqs * slots}",
                      rule="batched-tokens")
    if engine.enable_chunked_prefill is False and engine.max_num_batched_tokens < engine.context_length:
        yield Problem(file, "engine.max_num_batched_tokens",
                      f"with chunked prefill off it must be >= max_model_len ({engine.context_length}); vLLM "
                      "refuses to boot", "raise it, or drop enable_chunked_prefill: false", rule="chunked-prefill")


@rule
def gemma4_attention(file: str, spec: AppSpec) -> Iterator[Problem]:
    engine = spec.engine
    if not isinstance(engine, VllmEngine) or not is_gemma4(engine.model):
        return
    if engine.attention_backend == "flash_attn":
        yield Problem(file, "engine.attention_backend", "Gemma 4 fails with FLASH_ATTN (\"partial multimodal "
                      "token full attention not supported\")", "use triton_attn", rule="gemma4-flash-attn")
    for i, arg in enumerate(engine.extra_args):
        if arg.split("=", 1)[0] in HYBRID_KV_BREAKERS:
            yield Problem(file, f"engine.extra_args[{i}]", f"{arg.split('=', 1)[0]} disables the hybrid KV cache "
                          "manager: every sliding-window layer is sized for the full context (about 11x the KV)",
                          "remove it", rule="hybrid-kv")


@rule
def llamacpp_batches(file: str, spec: AppSpec) -> Iterator[Problem]:
    engine = spec.engine
    if not isinstance(engine, LlamaCppEngine):
        return
    if engine.ubatch_size and engine.batch_size and engine.ubatch_size > engine.batch_size:
        yield Problem(file, "engine.ubatch_size", f"{engine.ubatch_size} > batch_size {engine.batch_size}: "
                      "llama.cpp silently caps it", f"use at most {engine.batch_size}", rule="ubatch-batch")
    if engine.cache_type_v and engine.cache_type_v not in FULL_PRECISION_CACHE and engine.flash_attn != "on":
        yield Problem(file, "engine.cache_type_v", f"a quantized V cache ({engine.cache_type_v}) needs flash "
                      "attention", "set engine.flash_attn: \"on\"", rule="quantized-v-cache")
    mmproj = engine.model.mmproj
    if mmproj and is_gemma4(engine.model.repo) and "bf16" not in mmproj.lower():
        yield Problem(file, "engine.model.mmproj", f"{mmproj}: Gemma 4 audio needs the BF16 projector (F16 and "
                      "Q8_0 give repetitive output)", "use the mmproj-BF16.gguf file", rule="gemma4-mmproj-bf16")
