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
These steps are exact. The non-KV memory (weights, activation peak, CUDA graphs) is an estimate unless
calibrated from one boot's `Available KV cache memory` line.
"""

from __future__ import annotations

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
             for lay in layers_of(layers)]
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


