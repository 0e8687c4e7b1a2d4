"""Will it fit? GPU memory and KV-cache arithmetic for vLLM and llama.cpp (pure).

vLLM (v1 engine, checked against vllm/v1/core/kv_cache_utils.py and vllm/v1/kv_cache_interface.py):
- a layer's page is 2 x block x kv_heads x head_dim x dtype bytes; a request needs, per layer,
  cdiv(L, block) pages (full attention) or cdiv(min(window - 1 + max_num_batched_tokens, L), block) + 1
  pages (sliding window);
- identical layers form one group; layers of one kind (all full, or all sliding with one window) form one
  group whose need is the sum of the layers'; otherwise (hybrid) pages are unified to the largest by growing
  the smaller layers' blocks, and layers are split into groups of `group_size` layers each, so that
  needed(L) = group_size x page x sum over groups of cdiv(per-layer need, page);
- vLLM refuses a max_model_len whose need exceeds the available KV memory and binary-searches 1..L for the
  largest length that fits; available = ceil(total x gpu_memory_utilization) - non-KV memory.
These steps are exact. The non-KV memory (weights, activation peak, CUDA graphs) is an estimate unless
calibrated from one boot's `Available KV cache memory` line.

llama.cpp (checked against src/llama-context.cpp and src/llama-kv-cache-iswa.cpp): the KV cache is
allocated whole at start for -c tokens rounded up to 256, shared by the --parallel slots (each slot gets
c / parallel unless the cache is unified); sliding layers keep min(cells, window x seqs + ubatch) cells
rounded up to 256; KV-sharing layers own nothing; a quantized cache type stores 32 values in 34 (q8_0) or
18 (q4_0) bytes. The compute buffers and the CUDA runtime are estimates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from olarespack import quantity
from olarespack.arch import AttentionKind, KvLayer, ModelArch, ModelDataError, ModelInfo, find_model
from olarespack.errors import Problem, UsageError
from olarespack.hardware import profiles
from olarespack.spec import AppSpec, LlamaCppEngine, VllmEngine

GiB = 1 << 30
MiB = 1 << 20

VLLM_BLOCK_SIZE = 16
# `vllm serve` on GPUs under 70 GiB with chunked prefill (vllm/engine/arg_utils.py defaults).
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
# CUDA graphs plus memory outside torch's allocator (cuBLAS/NCCL workspaces, fragmentation). An estimate:
# set so that the seed's one measured vLLM boot (vision app, 2.82 GiB available) comes out within 0.05 GiB.
VLLM_RUNTIME_BYTES = int(1.75 * GiB)
VLLM_KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "bfloat16": 2, "float16": 2}
_VLLM_MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

LLAMACPP_CTX_PAD = 256
LLAMACPP_DEFAULT_BATCH = 2048
LLAMACPP_DEFAULT_UBATCH = 512
LLAMACPP_AUTO_PARALLEL = 4  # llama-server's --parallel auto: 4 slots over a unified cache
# CUDA context, cuBLAS workspace and host-visible buffers: an estimate.
LLAMACPP_RUNTIME_BYTES = 400 * MiB
# The multimodal projector's own compute buffer (encoder graph): an estimate.
MMPROJ_COMPUTE_BYTES = 256 * MiB
# ggml type -> (bytes per block, values per block)
GGML_TYPE_SIZE: dict[str, tuple[int, int]] = {
    "f32": (4, 1), "f16": (2, 1), "bf16": (2, 1), "q8_0": (34, 32), "q4_0": (18, 32), "q4_1": (20, 32),
    "iq4_nl": (18, 32), "q5_0": (22, 32), "q5_1": (24, 32),
}

Layers = ModelArch | Sequence[KvLayer]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pad(n: int, multiple: int) -> int:
    return cdiv(n, multiple) * multiple


def gib(n: float) -> float:
    return n / GiB


def _layers(layers: Layers) -> tuple[KvLayer, ...]:
    found = tuple(layers.layers if isinstance(layers, ModelArch) else layers)
    if not found:
        raise ValueError("a model without KV layers has nothing to size")
    return found


# --------------------------------------------------------------------------- vLLM KV cache


@dataclass(frozen=True)
class VllmKvSpec:
    """One layer's KV cache spec as vLLM builds it (FullAttentionSpec / SlidingWindowSpec)."""

    kind: AttentionKind
    block_size: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    window: int | None = None

    @property
    def page_bytes(self) -> int:
        return 2 * self.block_size * self.kv_heads * self.head_dim * self.dtype_bytes

    def max_memory_usage(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        if self.kind == "full":
            return cdiv(max_model_len, self.block_size) * self.page_bytes
        assert self.window is not None
        # chunked prefill keeps the last window - 1 tokens plus one scheduled batch; +1 because the window
        # need not start on a block boundary
        tokens = min(self.window - 1 + max_num_batched_tokens, max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_bytes


@dataclass(frozen=True)
class VllmKvLayout:
    """How vLLM groups the layers: `mode` names the branch of get_kv_cache_groups taken."""

    mode: Literal["uniform", "uniform_type", "hybrid"]
    specs: tuple[VllmKvSpec, ...]  # per layer, after page-size unification
    groups: tuple[VllmKvSpec, ...]  # one spec per KV cache group (block table)
    group_size: int  # layers per group (= number of shared memory pools)

    @property
    def page_bytes(self) -> int:
        """Bytes of one block across a group's layers' pages (summed for the uniform-type group)."""
        if self.mode == "uniform_type":
            return sum(s.page_bytes for s in self.specs)
        return self.groups[0].page_bytes

    def needed(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Bytes one request of max_model_len tokens may need (vLLM's check before it allocates)."""
        if self.mode == "uniform_type":
            return sum(s.max_memory_usage(max_model_len, max_num_batched_tokens) for s in self.specs)
        page = self.page_bytes
        return self.group_size * page * sum(
            cdiv(g.max_memory_usage(max_model_len, max_num_batched_tokens), page) for g in self.groups)

    def num_blocks(self, available: int) -> int:
        if self.mode == "uniform_type":
            return max(available // self.page_bytes, 0)
        return max(available // self.page_bytes // self.group_size, 0)

    def cache_tokens(self, available: int) -> int:
        """vLLM's "GPU KV cache size: N tokens" line."""
        return self.num_blocks(available) // len(self.groups) * min(g.block_size for g in self.groups)

    def concurrency(self, max_model_len: int, max_num_batched_tokens: int, available: int) -> float:
        """vLLM's "Maximum concurrency for N tokens per request" figure."""
        if self.mode == "uniform_type":
            per_request = max(cdiv(s.max_memory_usage(max_model_len, max_num_batched_tokens), s.page_bytes)
                              for s in self.specs)
        else:
            usage = sum(g.max_memory_usage(max_model_len, max_num_batched_tokens) for g in self.groups)
            per_request = cdiv(self.group_size * usage, self.page_bytes * self.group_size)
        return self.num_blocks(available) / per_request


def _group_key(spec: VllmKvSpec) -> tuple[object, ...]:
    return (spec.kind, spec.block_size, spec.kv_heads, spec.head_dim, spec.dtype_bytes, spec.window)


def vllm_kv_layout(layers: Layers, *, block_size: int = VLLM_BLOCK_SIZE, kv_dtype_bytes: int = 2) -> VllmKvLayout:
    specs = [VllmKvSpec(lay.kind, block_size, lay.kv_heads, lay.head_dim, kv_dtype_bytes, lay.window)
             for lay in _layers(layers)]
    if len({_group_key(s) for s in specs}) == 1:
        return VllmKvLayout("uniform", tuple(specs), (specs[0],), len(specs))
    kinds = {(s.kind, s.window) for s in specs}
    if len(kinds) == 1:  # one attention type, several head shapes: one group, pages summed
        return VllmKvLayout("uniform_type", tuple(specs), (specs[0],), len(specs))
    largest = max(s.page_bytes for s in specs)
    unified: list[VllmKvSpec] = []
    for s in specs:
        if largest % s.page_bytes:
            raise ModelDataError(f"vLLM cannot unify KV page sizes {s.page_bytes} and {largest} bytes "
                                 "(not a multiple); it would refuse to start this model")
        unified.append(replace(s, block_size=s.block_size * (largest // s.page_bytes)))
    same_type: dict[tuple[object, ...], list[VllmKvSpec]] = {}
    for s in unified:
        same_type.setdefault(_group_key(s), []).append(s)
    counts = [len(v) for v in same_type.values()]
    group_size = min(counts)
    if max(counts) < group_size * 1.5:  # few extra layers: pad the small type instead of splitting
        group_size = max(counts)
    groups = tuple(members[0] for members in same_type.values() for _ in range(cdiv(len(members), group_size)))
    return VllmKvLayout("hybrid", tuple(unified), groups, group_size)


def vllm_kv_needed(arch: Layers, max_model_len: int, *, block_size: int = VLLM_BLOCK_SIZE,
                   max_num_batched_tokens: int = VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, kv_dtype_bytes: int = 2) -> int:
    """KV bytes vLLM requires to serve one request of max_model_len tokens."""
    layout = vllm_kv_layout(arch, block_size=block_size, kv_dtype_bytes=kv_dtype_bytes)
    return layout.needed(max_model_len, max_num_batched_tokens)


def largest_fitting(upper: int, fits: Callable[[int], bool]) -> int:
    """vLLM's binary search: the largest n in 1..upper with fits(n), or 0 when not even 1 fits."""
    if upper < 1 or not fits(1):
        return 0
    result, left, right = 1, 1, upper
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def vllm_max_model_len(arch: Layers, available: int, *, max_model_len: int | None = None,
                       block_size: int = VLLM_BLOCK_SIZE,
                       max_num_batched_tokens: int = VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
                       kv_dtype_bytes: int = 2) -> int:
    """The largest max_model_len whose KV fits in `available` bytes, searched up to max_model_len (default: the
    model's max_position_embeddings); 0 when nothing fits. Equals vLLM's "estimated maximum model length"."""
    upper = max_model_len if max_model_len is not None else (
        arch.max_position_embeddings if isinstance(arch, ModelArch) else None)
    if upper is None:
        raise ValueError("give max_model_len: the layers alone do not say how far to search")
    layout = vllm_kv_layout(arch, block_size=block_size, kv_dtype_bytes=kv_dtype_bytes)
    return largest_fitting(upper, lambda n: layout.needed(n, max_num_batched_tokens) <= available)


def vllm_activation_bytes_per_token(arch: ModelArch) -> int:
    """Estimated activation peak per batched token: the residual stream plus the widest block's buffers."""
    hidden = arch.hidden_size or 4096
    widths = [2 * (arch.intermediate_size or 4 * hidden)]
    if arch.moe_intermediate_size and arch.experts_per_token:
        widths.append(arch.experts_per_token * (3 * arch.moe_intermediate_size + hidden))
    if arch.num_attention_heads:
        head = max(lay.head_dim for lay in arch.layers)
        widths.append(arch.num_attention_heads * head + max(2 * lay.kv_heads * lay.head_dim for lay in arch.layers))
    return arch.dtype_bytes * (4 * hidden + max(widths))


def vllm_overhead_estimate(arch: ModelArch, max_num_batched_tokens: int) -> int:
    """Non-KV, non-weight memory vLLM reserves: activation peak at max_num_batched_tokens + CUDA graphs."""
    return VLLM_RUNTIME_BYTES + max_num_batched_tokens * vllm_activation_bytes_per_token(arch)


def vllm_kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str, arch: ModelArch) -> int:
    if kv_cache_dtype != "auto":
        return VLLM_KV_DTYPE_BYTES[kv_cache_dtype]
    return _VLLM_MODEL_DTYPE_BYTES.get(model_dtype, arch.dtype_bytes)


# --------------------------------------------------------------------------- llama.cpp KV cache


def ggml_row_bytes(type_name: str, values: int) -> int:
    size, block = GGML_TYPE_SIZE[type_name]
    if values % block:
        raise ModelDataError(f"llama.cpp cannot store rows of {values} values as {type_name} (blocks of {block})")
    return values // block * size


@dataclass(frozen=True)
class LlamaCppContext:
    """How llama.cpp sizes its context from -c, --parallel, -b, -ub (src/llama-context.cpp)."""

    n_ctx: int  # total cells of a full-attention layer, over all streams
    n_ctx_seq: int  # cells one sequence (slot) may use
    n_stream: int
    n_ubatch: int
    n_seq_max: int
    unified: bool


def llamacpp_context(ctx_size: int, *, parallel: int = 1, kv_unified: bool = False,
                     batch_size: int = LLAMACPP_DEFAULT_BATCH,
                     ubatch_size: int = LLAMACPP_DEFAULT_UBATCH) -> LlamaCppContext:
    n_batch = min(ctx_size, batch_size)  # causal attention: a batch never exceeds the context
    n_ubatch = min(n_batch, ubatch_size)
    n_ctx = pad(ctx_size, LLAMACPP_CTX_PAD)
    if kv_unified:
        return LlamaCppContext(n_ctx, n_ctx, 1, n_ubatch, parallel, True)
    n_ctx_seq = pad(n_ctx // parallel, LLAMACPP_CTX_PAD)
    return LlamaCppContext(n_ctx_seq * parallel, n_ctx_seq, parallel, n_ubatch, parallel, False)


def llamacpp_kv_bytes(arch: Layers, ctx_size: int, *, parallel: int = 1, kv_unified: bool = False,
                      batch_size: int = LLAMACPP_DEFAULT_BATCH, ubatch_size: int = LLAMACPP_DEFAULT_UBATCH,
                      type_k: str = "f16", type_v: str = "f16", swa_full: bool = False) -> int:
    """Bytes llama.cpp allocates at start for the KV cache (all of it, whatever the prompts)."""
    ctx = llamacpp_context(ctx_size, parallel=parallel, kv_unified=kv_unified, batch_size=batch_size,
                           ubatch_size=ubatch_size)
    per_stream = ctx.n_ctx // ctx.n_stream
    total = 0
    for lay in _layers(arch):
        cells = per_stream
        if lay.kind == "sliding" and not swa_full:
            assert lay.window is not None
            seqs = ctx.n_seq_max if ctx.unified else 1
            cells = pad(min(per_stream, lay.window * seqs + ctx.n_ubatch), LLAMACPP_CTX_PAD)
        width = lay.kv_heads * lay.head_dim
        total += (ggml_row_bytes(type_k, width) + ggml_row_bytes(type_v, width)) * cells * ctx.n_stream
    return total


def llamacpp_compute_bytes(arch: ModelArch, n_ubatch: int, n_ctx: int, *, flash_attn: bool) -> int:
    """Estimated CUDA compute buffer: the ubatch's logits and widest activations in f32, plus the attention
    score matrix when flash attention is off."""
    hidden = arch.hidden_size or 4096
    width = (arch.vocab_size or 32000) + 4 * hidden + 3 * (arch.intermediate_size or 4 * hidden)
    scores = 0 if flash_attn else n_ubatch * n_ctx * (arch.num_attention_heads or 32) * 4
    return n_ubatch * width * 4 + scores


# --------------------------------------------------------------------------- the report


Source = Literal["estimate", "calibrated", "given"]


@dataclass(frozen=True)
class FitReport:
    """Where the GPU memory of one app goes, and whether its context fits. Bytes unless named otherwise."""

    app: str
    engine: Literal["vllm", "llamacpp"]
    model: str
    drafter: str | None
    total_bytes: int  # device memory the engine sees (the app's GPU memory limit)
    gpu_memory_utilization: float | None  # vLLM only
    budget_bytes: int  # ceil(total x utilization) for vLLM, the whole limit for llama.cpp
    weights_bytes: int  # on the GPU
    drafter_weights_bytes: int
    overhead_bytes: int  # activations / compute buffers, CUDA graphs and runtime
    overhead_source: Source
    kv_cache_needed_bytes: int  # at max_model_len, drafter KV included
    drafter_kv_bytes: int
    kv_cache_available_bytes: int
    headroom_bytes: int  # available - needed
    max_model_len: int  # asked (vLLM max_model_len, llama.cpp ctx_size)
    max_model_len_fit: int  # asked when it fits, else the largest that does (vLLM's estimate); 0 if none
    max_model_len_limit: int  # the largest that fits up to the model's native maximum (or the asked length)
    concurrency: float  # requests of max_model_len_fit tokens the cache holds at once
    fits: bool
    utilization_needed: float | None  # vLLM: gpu_memory_utilization for the asked context; llama.cpp: share
    kv_cache_dtype: str
    weights_exact: bool
    settings: dict[str, int | bool | str] = field(default_factory=dict)  # engine values the arithmetic used
    notes: tuple[str, ...] = ()

    @property
    def total_needed_bytes(self) -> int:
        return self.weights_bytes + self.drafter_weights_bytes + self.overhead_bytes + self.kv_cache_needed_bytes

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["total_needed_bytes"] = self.total_needed_bytes
        return data

    def table(self) -> list[str]:
        """The budget as lines of text (GiB), for a person."""
        engine = "vLLM" if self.engine == "vllm" else "llama.cpp"
        title = f"{self.app}: {engine}, {self.model}" + (f" + drafter {self.drafter}" if self.drafter else "")
        rows: list[tuple[str, int, str]] = [("GPU memory limit", self.total_bytes, "")]
        if self.gpu_memory_utilization is not None:
            rows.append((f"x gpu_memory_utilization {self.gpu_memory_utilization:g}", self.budget_bytes, ""))
        rows.append(("- weights", self.weights_bytes, "file sizes" if self.weights_exact else "estimate"))
        if self.drafter:
            rows.append(("- drafter weights", self.drafter_weights_bytes, "estimate"))
        rows += [
            ("- activations, CUDA graphs, runtime", self.overhead_bytes, self.overhead_source),
            ("= KV cache available", self.kv_cache_available_bytes, ""),
            (f"KV cache needed at {self.max_model_len} tokens", self.kv_cache_needed_bytes,
             f"drafter {gib(self.drafter_kv_bytes):.2f} GiB" if self.drafter_kv_bytes else ""),
            ("headroom", self.headroom_bytes, ""),
            ("total needed", self.total_needed_bytes, ""),
        ]
        width = max(len(label) for label, _, _ in rows)
        lines = [title]
        for label, value, note in rows:
            lines.append(f"  {label:<{width}}  {gib(value):8.2f} GiB" + (f"  ({note})" if note else ""))
        verdict = "fits" if self.fits else "DOES NOT FIT"
        lines.append(f"  {verdict}: largest context {self.max_model_len_fit} of {self.max_model_len} asked, "
                     f"{self.max_model_len_limit} up to the model's limit; "
                     f"{self.concurrency:.2f} requests at once of {self.max_model_len_fit} tokens")
        if self.utilization_needed is not None:
            what = "gpu_memory_utilization" if self.engine == "vllm" else "share of the GPU limit"
            lines.append(f"  needs {what} >= {self.utilization_needed:.2f}")
        lines += [f"  note: {note}" for note in self.notes]
        return lines


def gpu_memory_limit_bytes(spec: AppSpec) -> int:
    """What the engine sees as the device: the app's GPU memory limit, else the profile's HAMi limit."""
    if spec.resources.gpu_memory is not None:
        return quantity.parse_bytes(spec.resources.gpu_memory.limit)
    return profiles()[spec.hardware].hami_limit_mib * MiB


def _share_needed(total: int, need: int) -> float | None:
    """The smallest hundredth u with ceil(total x u) >= need, None above 1."""
    u = max(math.ceil(need / total * 100), 1)
    while math.ceil(total * (u / 100)) < need:
        u += 1
    return u / 100 if u <= 100 else None


def fit_report(spec: AppSpec, *, max_model_len: int | None = None, gpu_memory_utilization: float | None = None,
               kv_available_bytes: int | None = None, calibrated_kv_available_bytes: int | None = None,
               calibrated_at_utilization: float | None = None,
               registry: dict[str, ModelInfo] | None = None) -> FitReport:
    """The GPU memory budget of one app. `kv_available_bytes` replaces the computed KV budget; the calibrated
    pair (the `Available KV cache memory` of one vLLM boot and the utilization it ran at) replaces the
    estimated non-KV memory. `registry` replaces the shipped model data (keyed by repository)."""
    if max_model_len is not None and max_model_len < 1:
        raise UsageError(f"max_model_len must be a positive number of tokens, not {max_model_len}")
    for name, util in (("gpu_memory_utilization", gpu_memory_utilization),
                       ("calibrated_at_utilization", calibrated_at_utilization)):
        if util is not None and not 0 < util <= 1:
            raise UsageError(f"{name} must be in (0, 1], not {util}")
    if (calibrated_kv_available_bytes is None) != (calibrated_at_utilization is None):
        raise UsageError("calibration needs both the measured available KV bytes and the utilization of that boot")
    if kv_available_bytes is not None and calibrated_kv_available_bytes is not None:
        raise UsageError("give either kv_available_bytes or a calibration, not both")
    total = gpu_memory_limit_bytes(spec)
    if isinstance(spec.engine, VllmEngine):
        return _vllm_report(spec, spec.engine, total, max_model_len, gpu_memory_utilization, kv_available_bytes,
                            calibrated_kv_available_bytes, calibrated_at_utilization, registry)
    if calibrated_kv_available_bytes is not None:
        raise UsageError("calibration from `Available KV cache memory` applies to vLLM apps only")
    return _llamacpp_report(spec, spec.engine, total, max_model_len, kv_available_bytes, registry)


def _vllm_report(spec: AppSpec, engine: VllmEngine, total: int, asked: int | None, util: float | None,
                 given: int | None, cal_available: int | None, cal_util: float | None,
                 registry: dict[str, ModelInfo] | None) -> FitReport:
    target = find_model(engine.model, registry)
    if target.arch is None:
        raise ModelDataError(f"{engine.model} has no KV layers of its own: it cannot be a vLLM target")
    arch = target.arch
    notes: list[str] = []
    drafter = None
    if engine.speculative and engine.speculative.model:
        drafter = find_model(engine.speculative.model, registry)
        if drafter.arch is None:
            notes.append(f"drafter {drafter.repo} reads the target's KV cache and adds none")
    length = asked or (engine.max_model_len if engine.max_model_len != "auto" else arch.max_position_embeddings)
    if length is None:
        raise ModelDataError(f"{engine.model}: max_model_len auto needs the model's max_position_embeddings")
    utilization = util or engine.gpu_memory_utilization
    kv_bytes = vllm_kv_dtype_bytes(engine.kv_cache_dtype, engine.dtype, arch)
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
    budget = math.ceil(total * utilization)
    weights = target.weights_bytes
    drafter_weights = drafter.weights_bytes if drafter else 0
    source: Source
    if given is not None:
        available, source = given, "given"
        non_kv = budget - available
    elif cal_available is not None and cal_util is not None:
        non_kv, source = math.ceil(total * cal_util) - cal_available, "calibrated"
        available = budget - non_kv
        notes.append(f"non-KV memory calibrated from a boot at gpu_memory_utilization {cal_util:g} "
                     f"({gib(cal_available):.2f} GiB available)")
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
        app=spec.name, engine="vllm", model=target.repo, drafter=drafter.repo if drafter else None,
        total_bytes=total, gpu_memory_utilization=utilization, budget_bytes=budget,
        weights_bytes=weights, drafter_weights_bytes=drafter_weights,
        overhead_bytes=non_kv - weights - drafter_weights, overhead_source=source,
        kv_cache_needed_bytes=needed, drafter_kv_bytes=drafter_kv, kv_cache_available_bytes=available,
        headroom_bytes=available - needed, max_model_len=length, max_model_len_fit=fit_len,
        max_model_len_limit=limit,
        concurrency=layout.concurrency(fit_len, mnbt, available) if fit_len else 0.0,
        fits=fits, utilization_needed=_share_needed(total, non_kv + needed),
        kv_cache_dtype=engine.kv_cache_dtype, weights_exact=target.weights_exact,
        settings={"block_size": VLLM_BLOCK_SIZE, "max_num_batched_tokens": mnbt, "kv_dtype_bytes": kv_bytes,
                  "kv_layout": layout.mode, "kv_groups": len(layout.groups), "kv_group_size": layout.group_size,
                  "kv_page_bytes": layout.page_bytes, "kv_cache_tokens": layout.cache_tokens(max(available, 0))},
        notes=tuple(notes),
    )


def _flag(args: list[str], *names: str) -> bool:
    return any(a in names for a in args)


def _llamacpp_report(spec: AppSpec, engine: LlamaCppEngine, total: int, asked: int | None, given: int | None,
                     registry: dict[str, ModelInfo] | None) -> FitReport:
    info = find_model(engine.model.repo, registry)
    if info.arch is None:
        raise ModelDataError(f"{info.repo} has no KV layers of its own: llama.cpp cannot serve it alone")
    arch = info.arch
    notes: list[str] = []
    files = [engine.model.file] + ([engine.model.mmproj] if engine.model.mmproj else [])
    missing = [f for f in files if f not in info.files]
    if missing:
        raise ModelDataError(f"no size for {', '.join(missing)} in {info.repo}; known files: "
                             f"{', '.join(sorted(info.files)) or 'none'}")
    main = info.files[engine.model.file]
    weights = main.bytes - main.host_bytes + sum(info.files[f].bytes for f in files[1:])
    exact = main.exact and main.host_exact and all(info.files[f].exact for f in files[1:])
    if main.host_bytes:
        notes.append(f"{gib(main.host_bytes):.2f} GiB of input embeddings stay in host memory")
    length = asked or engine.ctx_size
    if engine.parallel is None:
        parallel, unified = LLAMACPP_AUTO_PARALLEL, True
        notes.append(f"--parallel not set: llama-server's {parallel} slots over a unified cache taken")
    else:
        parallel, unified = engine.parallel, _flag(engine.extra_args, "--kv-unified", "-kvu")
    swa_full = _flag(engine.extra_args, "--swa-full")
    type_k, type_v = engine.cache_type_k or "f16", engine.cache_type_v or "f16"
    flash = engine.flash_attn != "off"
    if type_v not in ("f32", "f16", "bf16") and not flash:
        notes.append("llama.cpp refuses a quantized V cache without flash attention (-fa on)")
    if engine.n_gpu_layers <= arch.num_hidden_layers:
        notes.append(f"n_gpu_layers {engine.n_gpu_layers} leaves layers on the CPU; the figures assume all on GPU")
    options: dict[str, Any] = {"parallel": parallel, "kv_unified": unified,
                               "batch_size": engine.batch_size or LLAMACPP_DEFAULT_BATCH,
                               "ubatch_size": engine.ubatch_size or LLAMACPP_DEFAULT_UBATCH}

    def kv_at(n: int) -> int:
        return llamacpp_kv_bytes(arch, n, type_k=type_k, type_v=type_v, swa_full=swa_full, **options)

    ctx = llamacpp_context(length, **options)
    needed = kv_at(length)
    overhead = (LLAMACPP_RUNTIME_BYTES + llamacpp_compute_bytes(arch, ctx.n_ubatch, ctx.n_ctx, flash_attn=flash)
                + (MMPROJ_COMPUTE_BYTES if engine.model.mmproj else 0))
    source: Source = "estimate"
    if given is not None:
        available, source = given, "given"
        overhead = total - weights - available
    else:
        available = total - weights - overhead
    fits = available > 0 and needed <= available

    def fits_at(n: int) -> bool:
        return kv_at(n) <= available

    fit_len = length if fits else (largest_fitting(length, fits_at) if available > 0 else 0)
    ceiling = max(length, arch.max_position_embeddings or length)
    fit_ctx = llamacpp_context(fit_len, **options) if fit_len else None
    return FitReport(
        app=spec.name, engine="llamacpp", model=f"{info.repo}/{engine.model.file}",
        drafter=None, total_bytes=total, gpu_memory_utilization=None, budget_bytes=total,
        weights_bytes=weights, drafter_weights_bytes=0, overhead_bytes=overhead, overhead_source=source,
        kv_cache_needed_bytes=needed, drafter_kv_bytes=0, kv_cache_available_bytes=available,
        headroom_bytes=available - needed, max_model_len=length, max_model_len_fit=fit_len,
        max_model_len_limit=largest_fitting(ceiling, fits_at) if available > 0 else 0,
        concurrency=float(fit_ctx.n_ctx // fit_ctx.n_ctx_seq) if fit_ctx else 0.0,
        fits=fits, utilization_needed=_share_needed(total, weights + overhead + needed),
        kv_cache_dtype=f"k {type_k}, v {type_v}", weights_exact=exact,
        settings={"n_ctx": ctx.n_ctx, "n_ctx_per_slot": ctx.n_ctx_seq, "n_ubatch": ctx.n_ubatch,
                  "parallel": parallel, "kv_unified": unified, "swa_full": swa_full, "flash_attn": flash},
        notes=tuple(notes),
    )


def spec_calibration(spec: AppSpec) -> dict[str, Any]:
    """fit_report's calibration arguments from the boot measurement a spec carries (none: {})."""
    engine = spec.engine
    if not isinstance(engine, VllmEngine) or engine.calibration is None:
        return {}
    return {
        "calibrated_kv_available_bytes": round(engine.calibration.available_kv_cache_gib * 2**30),
        "calibrated_at_utilization": engine.calibration.gpu_memory_utilization or engine.gpu_memory_utilization,
    }


def resolve_context(file: str, spec: AppSpec) -> tuple[AppSpec, list[Problem]]:
    """What the build checks: the context fits the GPU (else an error naming the largest that does and the
    utilization that would be needed), `max_model_len: auto` becomes that largest context, and a context
    past the model's trained window is a warning."""
    engine = spec.engine
    path = "engine.max_model_len" if isinstance(engine, VllmEngine) else "engine.ctx_size"
    auto = isinstance(engine, VllmEngine) and engine.max_model_len == "auto"
    try:
        report = fit_report(spec, **spec_calibration(spec))
    except ModelDataError as exc:
        problem = Problem(file, path, f"cannot check that the context fits the GPU: {exc}",
                          "add the model's architecture to olarespack's model data", rule="context-fit",
                          severity="error" if auto else "warning")
        return spec, [problem]
    if auto and isinstance(engine, VllmEngine):
        if report.max_model_len_fit < 1:
            return spec, [Problem(file, path, "no context fits: the weights alone exceed the GPU budget",
                                  "raise gpu_memory_utilization or pick a smaller model", rule="context-fit")]
        resolved = engine.model_copy(update={"max_model_len": report.max_model_len_fit})
        return (spec.model_copy(update={"engine": resolved}),
                _window_problems(file, path, spec, report.max_model_len_fit))
    problems = _window_problems(file, path, spec, report.max_model_len)
    if not report.fits:
        fix = f"use at most {report.max_model_len_fit} tokens"
        if report.utilization_needed is not None and isinstance(engine, VllmEngine):
            fix += f", or gpu_memory_utilization {report.utilization_needed:g}"
        if isinstance(engine, VllmEngine):
            fix += ", or max_model_len: auto"
        problems.append(Problem(
            file, path, f"{report.max_model_len} tokens need {gib(report.kv_cache_needed_bytes):.2f} GiB of KV "
            f"cache but {gib(max(report.kv_cache_available_bytes, 0)):.2f} GiB are available on {spec.hardware}",
            fix, rule="context-fit"))
    return spec, problems


def _window_problems(file: str, path: str, spec: AppSpec, asked: int) -> list[Problem]:
    engine = spec.engine
    repo = engine.model if isinstance(engine, VllmEngine) else engine.model.repo
    try:
        info = find_model(repo)
    except ModelDataError:
        return []
    positions = info.arch.max_position_embeddings if info.arch else None
    if positions is not None and asked > positions:
        return [Problem(file, path, f"{asked} is past {repo}'s {positions} positions: vLLM refuses to boot",
                        f"use at most {positions}", rule="context-window")]
    trained = info.trained_context
    if trained is not None and asked > trained:
        return [Problem(file, path, f"{asked} is past the {trained} tokens {repo} was trained for: it runs, "
                        "but recall past that is unreliable", f"use {trained} unless you need more",
                        rule="context-window", severity="warning")]
    return []
