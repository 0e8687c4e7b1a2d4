"""vLLM (0.20 / 0.21): its spec model, flag table, boot rules and fit arithmetic."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, StringConstraints

from olarespack.core.errors import ModelDataError, Problem
from olarespack.core.types import (
    MAX_ITEMS,
    ArgText,
    EnvName,
    HfRepo,
    Image,
    ModelPath,
    Revision,
    StrictModel,
    Text,
    Tokens,
)
from olarespack.core.units import gib, largest_fitting, share_needed
from olarespack.engines.base import MODEL_DIR, Arg, Engine, EngineSpec, Flag, compact_json
from olarespack.engines.calibration import VllmCalibration, calibration_problems
from olarespack.engines.common import image_tag, is_gemma4
from olarespack.engines.consistency import drafter_problems, parser_problems
from olarespack.fit.report import FitReport, FitRequest, Source
from olarespack.fit.vllm_kv import (
    VLLM_BLOCK_SIZE,
    VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
    vllm_kv_dtype_bytes,
    vllm_kv_layout,
    vllm_kv_needed,
    vllm_overhead_estimate,
)
from olarespack.models.arch import ModelInfo, find_model, models_for

if TYPE_CHECKING:
    from olarespack.spec.models import AppSpec

PORT = 8000
HF_HOME = f"{MODEL_DIR}/huggingface"

SpeculativeMethod = Literal[
    "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3",
    "extract_hidden_states", "dflash", "ngram_gpu", "mtp",
    "gemma4_mtp", "deepseek_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "mimo_mtp", "glm4_moe_mtp",
    "ernie_mtp", "longcat_flash_mtp",
]
SPECULATIVE_METHODS: tuple[str, ...] = get_args(SpeculativeMethod)
MTP_ALIASES = frozenset(m for m in SPECULATIVE_METHODS if m.endswith("_mtp"))
# Methods that draft with a separate model (or MTP head) and so need speculative.model.
NEEDS_DRAFT_MODEL = MTP_ALIASES | {"mtp", "dflash", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model"}
# The first vLLM release that knows a speculative method (only those that arrived in the versions we track).
METHOD_SINCE = {"gemma4_mtp": (0, 21, 0), "dflash": (0, 20, 0)}
DFLASH_MAX_TOKENS = 15  # DFlash drafters are trained with blocks of 16 positions
# Flags that make vLLM size every sliding-window layer for the full context (about 11x more KV on Gemma 4).
HYBRID_KV_BREAKERS = ("--disable-hybrid-kv-cache-manager", "--kv-transfer-config")


class Speculative(StrictModel):
    method: SpeculativeMethod = Field(
        description="vLLM speculative method (MTP aliases such as gemma4_mtp are rewritten to mtp).")
    model: HfRepo | None = Field(None, description="Draft model repository (required for MTP, DFlash, EAGLE).")
    num_speculative_tokens: int = Field(gt=0, le=128, description="Tokens drafted per step.")


Calibration = VllmCalibration  # the model and its provenance rule live in engines/calibration.py


KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "bfloat16", "float16"]
AttentionBackend = Literal[
    "triton_attn", "flash_attn", "flashinfer", "flex_attention", "tree_attn", "xformers", "rocm_attn",
    "cpu_attn", "flashmla", "cutlass_mla", "triton_mla",
]


class VllmEngine(EngineSpec):
    kind: Literal["vllm"]
    image: Image = Field(description="Container image with a pinned tag, e.g. vllm/vllm-openai:v0.21.0-cu129.")
    version: Annotated[str, StringConstraints(max_length=64,
                                              pattern=r"^[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*$")] | None = Field(
        None, description="vLLM version inside the image (e.g. 0.20.2rc1); needed only when the tag does not say it."
    )
    model: HfRepo = Field(description="Hugging Face repository of the served model.")
    revision: Revision | None = Field(None, description="Model revision (branch, tag or commit).")
    served_model_name: Text = Field(description="Name clients use in the OpenAI API.")
    max_model_len: Tokens | Literal["auto"] = Field(
        description="Context length (--max-model-len), or auto: the largest that fits the GPU, which the "
        "build computes with vLLM's own KV-cache arithmetic."
    )
    gpu_memory_utilization: float = Field(gt=0, le=1, description="Fraction of device memory vLLM may use.")
    # null: the flag is not written and vLLM's own default applies (an imported chart that never set it)
    kv_cache_dtype: KvCacheDtype | None = Field("auto", description="--kv-cache-dtype (null: not written).")
    attention_backend: AttentionBackend | None = Field(None, description="--attention-backend.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] | None = Field(
        "auto", description="--dtype (null: not written).")
    trust_remote_code: bool = Field(False, description="--trust-remote-code.")
    max_num_seqs: int | None = Field(None, gt=0, le=65_536, description="--max-num-seqs.")
    max_num_batched_tokens: Tokens | None = Field(None, description="--max-num-batched-tokens.")
    enable_prefix_caching: bool | None = Field(None, description="--enable-prefix-caching / --no-...")
    enable_chunked_prefill: bool | None = Field(None, description="--enable-chunked-prefill / --no-...")
    speculative: Speculative | None = Field(None, description="--speculative-config.")
    limit_mm_per_prompt: dict[Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,32}$")],
                              Annotated[int, Field(ge=0, le=1_000)]] | None = Field(
        None, max_length=8, description="--limit-mm-per-prompt, e.g. {image: 1}."
    )
    tool_call_parser: Text | None = Field(
        None, description="--tool-call-parser; also turns on --enable-auto-tool-choice."
    )
    reasoning_parser: Text | None = Field(None, description="--reasoning-parser.")
    extra_args: list[ArgText] = Field(default_factory=list, max_length=MAX_ITEMS,
                                      description="Further vLLM arguments, passed as given.")
    env: dict[EnvName, ArgText] = Field(default_factory=dict, max_length=MAX_ITEMS,
                                        description="Extra environment of the engine (values are literal: $(VAR) is "
                                        "not expanded).")
    calibration: Calibration | None = Field(
        None, description="One boot's measured KV budget and what it was measured on (model, image, hardware); "
        "replaces the estimated non-KV memory in fit checks. Written by `olarespack calibrate SPEC --log FILE`."
    )
    download_dir: ModelPath | None = Field(
        HF_HOME, description="--download-dir: where vLLM keeps the weights, under /models (the app's storage). "
        "Keep what an installed chart used, or an upgrade downloads the model again. null: not written (vLLM "
        "keeps them in HF_HOME's hub folder).")

    @property
    def context_length(self) -> int:
        if self.max_model_len == "auto":
            raise ValueError("max_model_len: auto is resolved by the build before it is read")
        return self.max_model_len


def _speculative_json(engine: VllmEngine) -> str | None:
    return compact_json(engine.speculative.model_dump(exclude_none=True)) if engine.speculative else None


def _modalities_json(engine: VllmEngine) -> str | None:
    limits = engine.limit_mm_per_prompt
    return compact_json(dict(sorted(limits.items()))) if limits else None


class Vllm(Engine):
    kind = "vllm"
    title = "vLLM"
    model = VllmEngine
    port = PORT
    container_name = "vllm"
    command = ("vllm", "serve")
    context_field = "max_model_len"
    accepts_auto_context = True
    hf_env = True  # vLLM downloads its own weights from the Hugging Face endpoint
    flags: ClassVar[tuple[Flag, ...]] = (
        Flag("", "engine.model", lambda e: e.model, "positional", aliases=("--model",)),
        Flag("--served-model-name", "engine.served_model_name", lambda e: e.served_model_name),
        Flag("--host", "chart", lambda e: "0.0.0.0"),
        Flag("--port", "chart", lambda e: e.port or PORT),
        Flag("--max-model-len", "engine.max_model_len", lambda e: e.context_length),
        Flag("--gpu-memory-utilization", "engine.gpu_memory_utilization", lambda e: f"{e.gpu_memory_utilization:g}"),
        Flag("--revision", "engine.revision", lambda e: e.revision, "given"),
        Flag("--max-num-seqs", "engine.max_num_seqs", lambda e: e.max_num_seqs, "given"),
        Flag("--max-num-batched-tokens", "engine.max_num_batched_tokens", lambda e: e.max_num_batched_tokens,
             "given"),
        Flag("--attention-backend", "engine.attention_backend", lambda e: e.attention_backend, "given"),
        # in SPEC_CONFIG, the name the seed charts, their users and reviewers know: a release that changes the
        # drafting shows as a one-line SPEC_CONFIG diff of the pod template
        Flag("--speculative-config", "engine.speculative", _speculative_json, "given", env="SPEC_CONFIG"),
        Flag("--kv-cache-dtype", "engine.kv_cache_dtype", lambda e: e.kv_cache_dtype),
        Flag("--dtype", "engine.dtype", lambda e: e.dtype),
        Flag("--trust-remote-code", "engine.trust_remote_code", lambda e: e.trust_remote_code, "given"),
        Flag("--download-dir", "engine.download_dir", lambda e: e.download_dir),
        Flag("--enable-prefix-caching", "engine.enable_prefix_caching", lambda e: e.enable_prefix_caching, "switch"),
        Flag("--enable-chunked-prefill", "engine.enable_chunked_prefill", lambda e: e.enable_chunked_prefill,
             "switch"),
        Flag("--limit-mm-per-prompt", "engine.limit_mm_per_prompt", _modalities_json, "given"),
        Flag("--enable-auto-tool-choice", "engine.tool_call_parser", lambda e: bool(e.tool_call_parser), "given"),
        Flag("--tool-call-parser", "engine.tool_call_parser", lambda e: e.tool_call_parser, "given"),
        Flag("--reasoning-parser", "engine.reasoning_parser", lambda e: e.reasoning_parser, "given"),
    )

    def args(self, engine: Any) -> list[Arg]:
        """The flag table's command line; the model is a positional of `vllm serve` only: the API server
        module run directly (a custom command) reads it from --model and would ignore a positional."""
        found = super().args(engine)
        command = engine.command or list(self.command)
        if command[-1:] != ["serve"] and found and found[0].flag is None:
            found[0] = Arg("--model", found[0].value)
        return found

    def listed_args(self, effective: list[str]) -> list[str]:
        return effective[2:] if effective[:1] == ["--model"] else effective[1:]  # the preset names the model

    def container_env(self, engine: Any) -> list[tuple[str, str]]:
        return [("HF_HOME", HF_HOME), *super().container_env(engine)]

    def template_values(self, engine: Any) -> dict[str, Any]:
        return {"hf_home": HF_HOME}

    def context_length(self, engine: Any) -> int:
        return int(engine.context_length)

    def auto_context(self, engine: Any) -> bool:
        return bool(engine.max_model_len == "auto")

    def model_repo(self, engine: Any) -> str:
        return str(engine.model)

    def version(self, engine: Any) -> str | None:
        if engine.version:
            return str(engine.version)
        match = re.search(r"^v(\d+\.\d+\.\d+)(?:-|$)", image_tag(engine.image) or "")
        return match.group(1) if match else None

    def release(self, engine: VllmEngine) -> tuple[int, int, int] | None:
        match = re.match(r"(\d+)\.(\d+)\.(\d+)", self.version(engine) or "")
        return (int(match[1]), int(match[2]), int(match[3])) if match else None

    def preset_lines(self, engine: Any) -> list[str]:
        lines = [f"- Model: `{engine.model}`"]
        if engine.speculative and engine.speculative.model:
            lines.append(f"- Drafter: `{engine.speculative.model}` ({engine.speculative.method}, "
                         f"num_speculative_tokens={engine.speculative.num_speculative_tokens})")
        lines.append(f"- Served model name: `{engine.served_model_name}`, context {engine.context_length} tokens")
        return lines

    def calibration(self, engine: Any) -> dict[str, Any]:
        measured = engine.calibration
        if measured is None or (measured.model or engine.model) != engine.model \
                or (measured.image or engine.image) != engine.image:
            return {}  # measured on another model or image: lint refuses it, and fit does not use it
        found = {
            "calibrated_kv_available_bytes": round(engine.calibration.available_kv_cache_gib * 2**30),
            "calibrated_at_utilization": engine.calibration.gpu_memory_utilization or engine.gpu_memory_utilization,
        }
        if engine.calibration.gpu_memory_mib:
            found["calibrated_total_bytes"] = engine.calibration.gpu_memory_mib * 2**20
        return found

    # ----------------------------------------------------------------------- rules

    def rules(self, file: str, spec: AppSpec) -> Iterator[Problem]:
        engine = spec.engine
        assert isinstance(engine, VllmEngine)
        yield from self._speculative(file, engine)
        if "--enable-auto-tool-choice" in engine.extra_args and not engine.tool_call_parser:
            yield Problem(file, "engine.tool_call_parser", "--enable-auto-tool-choice needs a tool-call parser "
                          "(vLLM refuses to start)", "set engine.tool_call_parser (e.g. gemma4) and drop the extra "
                          "arg", rule="tool-parser")
        yield from self._batching(file, engine)
        if is_gemma4(engine.model):
            yield from self._gemma4(file, engine)
        yield from self._consistency(file, spec, engine)

    def _consistency(self, file: str, spec: AppSpec, engine: VllmEngine) -> Iterator[Problem]:
        """The drafter is made for the target, the parsers suit its family, the calibration is this setup's."""
        try:
            registry: dict[str, ModelInfo] = models_for(file)
        except ModelDataError:
            registry = {}  # the fit rule reports model data it cannot read
        if engine.speculative and engine.speculative.model:
            yield from drafter_problems(file, "engine.speculative", engine.model, engine.speculative.model, registry)
        yield from parser_problems(file, engine.model, registry, tool_parser=engine.tool_call_parser,
                                   reasoning_parser=engine.reasoning_parser)
        yield from calibration_problems(file, engine.model, engine.image, spec.hardware, engine.calibration)

    def _speculative(self, file: str, engine: VllmEngine) -> Iterator[Problem]:
        if engine.speculative is None:
            return
        method = engine.speculative.method
        if method in NEEDS_DRAFT_MODEL and engine.speculative.model is None:
            yield Problem(file, "engine.speculative.model", f"{method} needs a draft model (without one vLLM "
                          "drafts with the target itself)", "set the drafter's repository", rule="spec-draft-model")
        release = self.release(engine)
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

    def _batching(self, file: str, engine: VllmEngine) -> Iterator[Problem]:
        if engine.max_num_batched_tokens is None:
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

    def _gemma4(self, file: str, engine: VllmEngine) -> Iterator[Problem]:
        if engine.attention_backend == "flash_attn":
            yield Problem(file, "engine.attention_backend", "Gemma 4 fails with FLASH_ATTN (\"partial multimodal "
                          "token full attention not supported\")", "use triton_attn", rule="gemma4-flash-attn")
        for i, arg in enumerate(engine.extra_args):
            if arg.split("=", 1)[0] in HYBRID_KV_BREAKERS:
                yield Problem(file, f"engine.extra_args[{i}]", f"{arg.split('=', 1)[0]} disables the hybrid KV "
                              "cache manager: every sliding-window layer is sized for the full context (about 11x "
                              "the KV)", "remove it", rule="hybrid-kv")

    # ----------------------------------------------------------------------- fit

    def fit(self, spec: AppSpec, request: FitRequest) -> FitReport:
        engine = spec.engine
        assert isinstance(engine, VllmEngine)
        target = find_model(engine.model, request.registry)
        if target.arch is None:
            raise ModelDataError(f"{engine.model} has no KV layers of its own: it cannot be a vLLM target")
        arch = target.arch
        notes: list[str] = []
        drafter = None
        if engine.speculative and engine.speculative.model:
            drafter = find_model(engine.speculative.model, request.registry)
            if drafter.arch is None:
                notes.append(f"drafter {drafter.repo} reads the target's KV cache and adds none")
        length = request.max_model_len or (engine.max_model_len if engine.max_model_len != "auto"
                                   else arch.max_position_embeddings)
        if length is None:
            raise ModelDataError(f"{engine.model}: max_model_len auto needs the model's max_position_embeddings")
        utilization = request.gpu_memory_utilization or engine.gpu_memory_utilization
        kv_bytes = vllm_kv_dtype_bytes(engine.kv_cache_dtype or "auto", engine.dtype or "auto", arch)
        mnbt = engine.max_num_batched_tokens
        if mnbt is None:
            mnbt = VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
            if engine.enable_chunked_prefill is False:
                mnbt = max(length, mnbt)
            notes.append(f"max_num_batched_tokens not set: vLLM's default {mnbt} taken")
        layers = arch.layers + (drafter.arch.layers if drafter and drafter.arch else ())
        layout = vllm_kv_layout(layers, kv_dtype_bytes=kv_bytes)
        needed = layout.needed(length, mnbt)
        drafter_kv = needed - vllm_kv_needed(arch, length, max_num_batched_tokens=mnbt, kv_dtype_bytes=kv_bytes)
        budget = math.ceil(request.total * utilization)
        weights = target.weights_bytes
        drafter_weights = drafter.weights_bytes if drafter else 0
        source: Source
        if request.kv_available_bytes is not None:
            available, source = request.kv_available_bytes, "given"
            non_kv = budget - available
        elif request.calibrated_kv_available_bytes is not None and request.calibrated_at_utilization is not None:
            measured_total = request.calibrated_total_bytes or request.total
            measured_kv = request.calibrated_kv_available_bytes
            non_kv = math.ceil(measured_total * request.calibrated_at_utilization) - measured_kv
            source = "calibrated"
            available = budget - non_kv
            notes.append(f"non-KV memory calibrated from a boot at gpu_memory_utilization "
                         f"{request.calibrated_at_utilization:g} ({gib(measured_kv):.2f} GiB available)")
        else:
            non_kv = weights + drafter_weights + vllm_overhead_estimate(arch, mnbt)
            available, source = budget - non_kv, "estimate"
        fits = available > 0 and needed <= available

        def fits_at(n: int) -> bool:
            return layout.needed(n, mnbt) <= available

        fit_len = length if fits else (largest_fitting(length, fits_at) if available > 0 else 0)
        ceiling = max(length, arch.max_position_embeddings or length)
        limit = largest_fitting(ceiling, fits_at) if available > 0 else 0
        return FitReport(
            app=spec.name, engine=self.kind, engine_title=self.title, model=target.repo,
            drafter=drafter.repo if drafter else None,
            total_bytes=request.total, gpu_memory_utilization=utilization, budget_bytes=budget,
            weights_bytes=weights, drafter_weights_bytes=drafter_weights,
            overhead_bytes=non_kv - weights - drafter_weights, overhead_source=source,
            kv_cache_needed_bytes=needed, drafter_kv_bytes=drafter_kv, kv_cache_available_bytes=available,
            headroom_bytes=available - needed, max_model_len=length, max_model_len_fit=fit_len,
            max_model_len_limit=limit,
            concurrency=layout.concurrency(fit_len, mnbt, available) if fit_len else 0.0,
            fits=fits, utilization_needed=share_needed(request.total, non_kv + needed),
            kv_cache_dtype=engine.kv_cache_dtype or "auto", weights_exact=target.weights_exact,
            settings={"block_size": VLLM_BLOCK_SIZE, "max_num_batched_tokens": mnbt, "kv_dtype_bytes": kv_bytes,
                      "kv_layout": layout.mode, "kv_groups": len(layout.groups), "kv_group_size": layout.group_size,
                      "kv_page_bytes": layout.page_bytes,
                      "kv_cache_tokens": layout.cache_tokens(max(available, 0))},
            notes=tuple(notes),
        )


ENGINE = Vllm()
