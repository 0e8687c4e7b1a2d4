"""vLLM's own KV-cache arithmetic (v1 engine, checked against vllm/v1/core/kv_cache_utils.py and
vllm/v1/kv_cache_interface.py), pure:
- a layer's page is 2 x block x kv_heads x head_dim x dtype bytes; a request needs, per layer,
  cdiv(L, block) pages (full attention) or cdiv(min(window - 1 + max_num_batched_tokens, L), block) + 1
  pages (sliding window);
- identical layers form one group; layers of one kind (all full, or all sliding with one window) form one
  group whose need is the sum of the layers'; otherwise (hybrid) pages are unified to the largest by growing
  the smaller layers' blocks, and layers are split into groups of `group_size` layers each, so that
  needed(L) = group_size x page x sum over groups of cdiv(per-layer need, page);
- vLLM refuses a max_model_len whose need exceeds the available KV memory and binary-searches 1..L for the
  largest length that fits; available = ceil(total x gpu_memory_utilization) - non-KV memory.
Releases differ (VllmKvRules, bisected over the release wheels' sources, 0.20.2 to 0.33.0):
- from 0.25, `--mm-ipc-gpu-memory-gb` is carved out of the available memory (after the boot's `Available KV
  cache memory` line is logged);
- from 0.26, a sliding layer keeps one batch per batch in flight (`max_concurrent_batches x
  max_num_batched_tokens`), two with async scheduling, which is on unless the drafting method cannot run
  with it (on for every EAGLE-family method, mtp and dflash included, since before 0.21);
- from 0.29, the fit check and the largest-length search plan against the available memory less one block
  of the pool (the null block the block pool holds back); the number of blocks still counts it.
These steps are exact. The non-KV memory (weights, activation peak, CUDA graphs) is an estimate unless
calibrated from one boot's `Available KV cache memory` line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from olarespack.core.errors import ModelDataError
from olarespack.core.units import GiB, cdiv, largest_fitting
from olarespack.models.arch import AttentionKind, Layers, ModelArch, layers_of

VLLM_BLOCK_SIZE = 16
# `vllm serve` on GPUs under 70 GiB with chunked prefill (vllm/engine/arg_utils.py defaults).
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
# CUDA graphs plus memory outside torch's allocator (cuBLAS/NCCL workspaces, fragmentation). An estimate:
# set so that the seed's one measured vLLM boot (vision app, 2.82 GiB available) comes out within 0.05 GiB.
VLLM_RUNTIME_BYTES = int(1.75 * GiB)
VLLM_KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "bfloat16": 2, "float16": 2}
_VLLM_MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

Release = tuple[int, int, int]
# The first release of each change to the arithmetic (the cached wheels: 0.24.0 lacks the mm-ipc reservation,
# 0.25.1 has it; 0.25.0 was not read).
MM_IPC_SINCE: Release = (0, 25, 0)
IN_FLIGHT_SINCE: Release = (0, 26, 0)
NULL_BLOCK_SINCE: Release = (0, 29, 0)
DRAFT_MODEL_ASYNC_SINCE: Release = (0, 28, 0)
# Methods whose drafting runs with async scheduling (vLLM's EagleModelTypes and NgramGPUTypes): vLLM turns it
# on by default for them, and off for the others.
_ASYNC_METHODS = frozenset({"eagle", "eagle3", "extract_hidden_states", "dflash", "ngram_gpu", "mtp"})


@dataclass(frozen=True)
class VllmKvRules:
    """What one vLLM release does around the per-layer sizes: batches a sliding layer keeps in flight, whether
    one pool block is held back from the fit check, and the bytes carved out for frontend multimodal work."""

    in_flight_batches: int = 1
    null_block: bool = False
    mm_ipc_bytes: int = 0
    async_scheduling: bool = False


def vllm_async_default(release: Release | None, method: str | None) -> bool:
    """vLLM's async_scheduling when the command line does not set it (one GPU, no pipeline parallelism)."""
    if method is None or method in _ASYNC_METHODS or method.endswith("_mtp"):
        return True
    return method == "draft_model" and release is not None and release >= DRAFT_MODEL_ASYNC_SINCE


def vllm_kv_rules(
    release: Release | None,
    *,
    method: str | None = None,
    async_scheduling: bool | None = None,
    mm_ipc_gpu_memory_gb: float = 0.0,
) -> VllmKvRules:
    """The rules of `release` (None: an unknown release, read as the oldest tracked)."""
    on = vllm_async_default(release, method) if async_scheduling is None else async_scheduling
    if release is None:
        return VllmKvRules(async_scheduling=on)
    return VllmKvRules(
        in_flight_batches=2 if on and release >= IN_FLIGHT_SINCE else 1,
        null_block=release >= NULL_BLOCK_SINCE,
        mm_ipc_bytes=int(mm_ipc_gpu_memory_gb * GiB) if release >= MM_IPC_SINCE else 0,
        async_scheduling=on,
    )


def vllm_cli_settings(args: Sequence[str]) -> tuple[bool | None, float]:
    """async_scheduling (None: not set) and --mm-ipc-gpu-memory-gb from vLLM arguments; the last one wins, as
    in argparse."""
    async_scheduling: bool | None = None
    mm_ipc = 0.0
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in ("--async-scheduling", "--no-async-scheduling"):
            async_scheduling = name == "--async-scheduling"
        elif name == "--mm-ipc-gpu-memory-gb":
            text = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                mm_ipc = max(float(text), 0.0)
            except ValueError:
                raise ModelDataError(f"--mm-ipc-gpu-memory-gb {text!r} is not a number of GiB") from None
    return async_scheduling, mm_ipc


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

    def max_memory_usage(self, max_model_len: int, in_flight_tokens: int) -> int:
        if self.kind == "full":
            return cdiv(max_model_len, self.block_size) * self.page_bytes
        assert self.window is not None
        # chunked prefill keeps the last window - 1 tokens plus the batches scheduled but not yet settled; +1
        # because the window need not start on a block boundary
        tokens = min(self.window - 1 + in_flight_tokens, max_model_len)
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

    @property
    def pool_block_bytes(self) -> int:
        """Bytes one block takes in the shared pool, over every layer it backs."""
        return self.page_bytes if self.mode == "uniform_type" else self.page_bytes * self.group_size

    def needed(self, max_model_len: int, in_flight_tokens: int) -> int:
        """Bytes one request of max_model_len tokens may need (vLLM's check before it allocates), with
        in_flight_tokens scheduled but not settled (max_num_batched_tokens per batch in flight)."""
        if self.mode == "uniform_type":
            return sum(s.max_memory_usage(max_model_len, in_flight_tokens) for s in self.specs)
        page = self.page_bytes
        return (
            self.group_size
            * page
            * sum(cdiv(g.max_memory_usage(max_model_len, in_flight_tokens), page) for g in self.groups)
        )

    def plannable(self, available: int, rules: VllmKvRules) -> int:
        """What the fit check and the length search compare the need against."""
        return available - self.pool_block_bytes if rules.null_block else available

    def num_blocks(self, available: int) -> int:
        return max(available // self.pool_block_bytes, 0)

    def cache_tokens(self, available: int) -> int:
        """vLLM's "GPU KV cache size: N tokens" line."""
        return self.num_blocks(available) // len(self.groups) * min(g.block_size for g in self.groups)

    def concurrency(self, max_model_len: int, in_flight_tokens: int, available: int) -> float:
        """vLLM's "Maximum concurrency for N tokens per request" figure."""
        if self.mode == "uniform_type":
            per_request = max(
                cdiv(s.max_memory_usage(max_model_len, in_flight_tokens), s.page_bytes) for s in self.specs
            )
        else:
            usage = sum(g.max_memory_usage(max_model_len, in_flight_tokens) for g in self.groups)
            per_request = cdiv(self.group_size * usage, self.page_bytes * self.group_size)
        return self.num_blocks(available) / per_request


def _group_key(spec: VllmKvSpec) -> tuple[object, ...]:
    return (spec.kind, spec.block_size, spec.kv_heads, spec.head_dim, spec.dtype_bytes, spec.window)


def vllm_kv_layout(layers: Layers, *, block_size: int = VLLM_BLOCK_SIZE, kv_dtype_bytes: int = 2) -> VllmKvLayout:
    specs = [
        VllmKvSpec(lay.kind, block_size, lay.kv_heads, lay.head_dim, kv_dtype_bytes, lay.window)
        for lay in layers_of(layers)
    ]
    if len({_group_key(s) for s in specs}) == 1:
        return VllmKvLayout("uniform", tuple(specs), (specs[0],), len(specs))
    kinds = {(s.kind, s.window) for s in specs}
    if len(kinds) == 1:  # one attention type, several head shapes: one group, pages summed
        return VllmKvLayout("uniform_type", tuple(specs), (specs[0],), len(specs))
    largest = max(s.page_bytes for s in specs)
    unified: list[VllmKvSpec] = []
    for s in specs:
        if largest % s.page_bytes:
            raise ModelDataError(
                f"vLLM cannot unify KV page sizes {s.page_bytes} and {largest} bytes "
                "(not a multiple); it would refuse to start this model"
            )
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


def vllm_kv_needed(
    arch: Layers,
    max_model_len: int,
    *,
    block_size: int = VLLM_BLOCK_SIZE,
    max_num_batched_tokens: int = VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
    kv_dtype_bytes: int = 2,
    rules: VllmKvRules = VllmKvRules(),
) -> int:
    """KV bytes vLLM requires to serve one request of max_model_len tokens."""
    layout = vllm_kv_layout(arch, block_size=block_size, kv_dtype_bytes=kv_dtype_bytes)
    return layout.needed(max_model_len, rules.in_flight_batches * max_num_batched_tokens)


def vllm_max_model_len(
    arch: Layers,
    available: int,
    *,
    max_model_len: int | None = None,
    block_size: int = VLLM_BLOCK_SIZE,
    max_num_batched_tokens: int = VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
    kv_dtype_bytes: int = 2,
    rules: VllmKvRules = VllmKvRules(),
) -> int:
    """The largest max_model_len whose KV fits in `available` bytes, searched up to max_model_len (default: the
    model's max_position_embeddings); 0 when nothing fits. Equals vLLM's "estimated maximum model length"
    (`available` is taken after any mm-ipc reservation)."""
    upper = (
        max_model_len
        if max_model_len is not None
        else (arch.max_position_embeddings if isinstance(arch, ModelArch) else None)
    )
    if upper is None:
        raise ValueError("give max_model_len: the layers alone do not say how far to search")
    layout = vllm_kv_layout(arch, block_size=block_size, kv_dtype_bytes=kv_dtype_bytes)
    room, in_flight = layout.plannable(available, rules), rules.in_flight_batches * max_num_batched_tokens
    return largest_fitting(upper, lambda n: layout.needed(n, in_flight) <= room)


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
        if kv_cache_dtype not in VLLM_KV_DTYPE_BYTES:
            raise ModelDataError(
                f"kv_cache_dtype {kv_cache_dtype}: its page layout is not modelled (fit knows "
                f"auto, {', '.join(sorted(VLLM_KV_DTYPE_BYTES))})"
            )
        return VLLM_KV_DTYPE_BYTES[kv_cache_dtype]
    return _VLLM_MODEL_DTYPE_BYTES.get(model_dtype, arch.dtype_bytes)
