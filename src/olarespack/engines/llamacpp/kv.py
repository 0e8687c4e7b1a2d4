"""llama.cpp's KV-cache allocation (checked against src/llama-context.cpp and src/llama-kv-cache-iswa.cpp),
pure: the KV cache is allocated whole at start for -c tokens rounded up to 256, shared by the --parallel
slots (each slot gets c / parallel unless the cache is unified); sliding layers keep
min(cells, window x seqs + ubatch) cells rounded up to 256; KV-sharing layers own nothing; a quantized cache
type stores 32 values in 34 (q8_0) or 18 (q4_0) bytes; without flash attention the V cache is stored transposed,
every layer's rows as wide as the widest layer's (src/llama-kv-cache.cpp: n_embd_v_gqa_max when v_trans).
The compute buffers and the CUDA runtime are estimates fitted to CUDA boots (measured.md) and kept above them
by a stated margin; two terms come from the source: the KQ mask spans one slot's cells (the reserved ubatch
splits its tokens over the streams), and with flash attention a cache that is not f16 is copied to f16 in the
compute buffer (ggml-cuda fattn.cu, ggml_cuda_flash_attn_ext_get_alloc_size: the tile and MMA kernels, which
a 512-token ubatch uses, read f16 only), the widest layer's whole K and V view, all slots.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from olarespack.core.errors import ModelDataError
from olarespack.core.units import MiB, pad
from olarespack.models.arch import KvLayer, Layers, ModelArch, layers_of

LLAMACPP_CTX_PAD = 256
LLAMACPP_DEFAULT_BATCH = 2048
LLAMACPP_DEFAULT_UBATCH = 512
LLAMACPP_AUTO_PARALLEL = 4  # llama-server's --parallel auto: 4 slots over a unified cache
# CUDA context, loaded kernels and cuBLAS workspace, not in any buffer line, after a first request of 500 tokens
# on an H200 (measured.md): Gemma 4 E4B's shapes 708-717 MiB, a dense Llama-3.1-8B shape 600-609 MiB. One
# bound for every model class: the largest measured and 19 MiB (fit's totals are 0.7-3.6% above the dense
# model's 20 boots with it); a consumer card's context is smaller.
LLAMACPP_RUNTIME_BYTES = 736 * MiB
# The compute-buffer estimate is this much above the fitted figures; the fit is within 1% of every CUDA boot
# measured (Gemma 4 E4B's shapes at 4K-128K, ubatch 256 and 512), so 10% keeps each boot below the estimate.
LLAMACPP_COMPUTE_MARGIN = 1.10
# The multimodal projector's own GPU memory beyond its weights: Gemma 4's vision and audio encoders at
# transformers 5.24's shapes (the BF16 projector's, within 0.3% of its size) took 810.46 MiB on CUDA: the two
# warm-up compute buffers (101.27 + 101.19 MiB) and what a largest image (1089 tokens) and 30 s of audio added
# (484 + 124 MiB, nvidia-smi), measured.md. With the compute margin; another projector's is an estimate.
MMPROJ_COMPUTE_BYTES = 892 * MiB
# ggml type -> (bytes per block, values per block)
GGML_TYPE_SIZE: dict[str, tuple[int, int]] = {
    "f32": (4, 1),
    "f16": (2, 1),
    "bf16": (2, 1),
    "q8_0": (34, 32),
    "q4_0": (18, 32),
    "q4_1": (20, 32),
    "iq4_nl": (18, 32),
    "q5_0": (22, 32),
    "q5_1": (24, 32),
}


# --------------------------------------------------------------------------- llama.cpp KV cache


def ggml_row_bytes(type_name: str, values: int, type_sizes: Mapping[str, tuple[int, int]] | None = None) -> int:
    sizes = GGML_TYPE_SIZE if type_sizes is None else type_sizes
    if type_name not in sizes:
        raise ModelDataError(f"no storage size known for the KV cache type {type_name!r}")
    size, block = sizes[type_name]
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


def llamacpp_context(
    ctx_size: int,
    *,
    parallel: int = 1,
    kv_unified: bool = False,
    batch_size: int = LLAMACPP_DEFAULT_BATCH,
    ubatch_size: int = LLAMACPP_DEFAULT_UBATCH,
) -> LlamaCppContext:
    n_batch = min(ctx_size, batch_size)  # causal attention: a batch never exceeds the context
    n_ubatch = min(n_batch, ubatch_size)
    n_ctx = pad(ctx_size, LLAMACPP_CTX_PAD)
    if kv_unified:
        return LlamaCppContext(n_ctx, n_ctx, 1, n_ubatch, parallel, True)
    n_ctx_seq = pad(n_ctx // parallel, LLAMACPP_CTX_PAD)
    return LlamaCppContext(n_ctx_seq * parallel, n_ctx_seq, parallel, n_ubatch, parallel, False)


def _cells(lay: KvLayer, ctx: LlamaCppContext, swa_full: bool) -> int:
    """Cells of one layer's cache per stream: a sliding layer keeps its window (per sequence of a unified
    cache) and a ubatch, padded, unless --swa-full."""
    per_stream = ctx.n_ctx // ctx.n_stream
    if lay.kind != "sliding" or swa_full:
        return per_stream
    assert lay.window is not None
    seqs = ctx.n_seq_max if ctx.unified else 1
    return pad(min(per_stream, lay.window * seqs + ctx.n_ubatch), LLAMACPP_CTX_PAD)


def llamacpp_kv_bytes(
    arch: Layers,
    ctx_size: int,
    *,
    parallel: int = 1,
    kv_unified: bool = False,
    batch_size: int = LLAMACPP_DEFAULT_BATCH,
    ubatch_size: int = LLAMACPP_DEFAULT_UBATCH,
    type_k: str = "f16",
    type_v: str = "f16",
    swa_full: bool = False,
    flash_attn: bool = True,
    type_sizes: Mapping[str, tuple[int, int]] | None = None,
) -> int:
    """Bytes llama.cpp allocates at start for the KV cache (all of it, whatever the prompts)."""
    ctx = llamacpp_context(
        ctx_size, parallel=parallel, kv_unified=kv_unified, batch_size=batch_size, ubatch_size=ubatch_size
    )
    layers = layers_of(arch)
    widest = max((lay.kv_heads * lay.head_dim for lay in layers), default=0)
    total = 0
    for lay in layers:
        cells = _cells(lay, ctx, swa_full)
        width = lay.kv_heads * lay.head_dim
        total += (
            (
                ggml_row_bytes(type_k, width, type_sizes)
                + ggml_row_bytes(type_v, width if flash_attn else widest, type_sizes)
            )
            * cells
            * ctx.n_stream
        )
    return total


def _compute_width(arch: ModelArch) -> int:
    """f32 values one ubatch token keeps live in the widest part of the graph: the FFN (gate, up, their
    product) and the residual and attention activations; a Gemma 3n / 4 E model adds its per-layer inputs. The
    logits are not among them: the graph is reserved for one output per sequence."""
    hidden = arch.hidden_size or 4096
    per_layer = (arch.per_layer_input_size or 0) * arch.num_hidden_layers
    return 4 * hidden + 3 * (arch.intermediate_size or 4 * hidden) + per_layer


def llamacpp_f16_copy_bytes(
    arch: Layers,
    ctx_size: int,
    *,
    parallel: int = 1,
    kv_unified: bool = False,
    batch_size: int = LLAMACPP_DEFAULT_BATCH,
    ubatch_size: int = LLAMACPP_DEFAULT_UBATCH,
    type_k: str = "f16",
    type_v: str = "f16",
    swa_full: bool = False,
    flash_attn: bool = True,
) -> int:
    """Bytes of the f16 copies ggml-cuda's flash attention makes of a cache that is not f16: the K (and V) view
    of the layer with the most cells x width, over every stream, 2 bytes a value, held in the compute buffer
    while that layer's attention runs (one layer at a time). Without flash attention there is none."""
    if not flash_attn:
        return 0
    ctx = llamacpp_context(
        ctx_size, parallel=parallel, kv_unified=kv_unified, batch_size=batch_size, ubatch_size=ubatch_size
    )
    widest = max(
        (_cells(lay, ctx, swa_full) * ctx.n_stream * lay.kv_heads * lay.head_dim for lay in layers_of(arch)), default=0
    )
    return 2 * widest * ((type_k != "f16") + (type_v != "f16"))


def _mask_bytes(flash_attn: bool) -> int:
    """Bytes per ubatch token and context token of the KQ mask: f16 for flash attention, f32 without it."""
    return 2 if flash_attn else 4


def llamacpp_compute_bytes(
    arch: ModelArch, n_ubatch: int, n_ctx: int, *, flash_attn: bool, n_ctx_seq: int | None = None, f16_copies: int = 0
) -> int:
    """Estimated GPU compute buffer (the CUDA0 line): the ubatch's widest activations in f32 and the KQ mask
    over one slot's cells (`n_ctx_seq`, all of `n_ctx` for one slot or a unified cache), plus the f32 attention
    scores of every head when flash attention is off; with LLAMACPP_COMPUTE_MARGIN; plus `f16_copies`
    (llamacpp_f16_copy_bytes, exact sizes, no margin). Fitted to CUDA boots of b11434 (measured.md): Gemma 4
    E4B at ubatch 256-2048 and 4K-128K grows 2 bytes per ubatch token and context token with flash attention
    (134.02 MiB at 32K, 230.02 at 128K, ubatch 512) and 36 without it (8 heads x 4 + an f32 mask: 638.51 and
    2366.51 MiB); with `-np 4` at 128K it is 134.02 MiB, the mask of one 32K slot."""
    cells = n_ctx if n_ctx_seq is None else n_ctx_seq
    mask = n_ubatch * cells * _mask_bytes(flash_attn)
    scores = 0 if flash_attn else n_ubatch * cells * (arch.num_attention_heads or 32) * 4
    return math.ceil((n_ubatch * _compute_width(arch) * 4 + mask + scores) * LLAMACPP_COMPUTE_MARGIN) + f16_copies


def llamacpp_host_compute_bytes(
    arch: ModelArch, n_ubatch: int, n_ctx: int, *, flash_attn: bool = True, n_ctx_seq: int | None = None
) -> int:
    """Estimated pinned host compute buffer (the CUDA_Host line): the input embeddings looked up on the host
    (token_embd and a Gemma E model's per-layer table stay there) and the mask's host copy, one slot's cells;
    with the margin. Fitted like the GPU buffer: 79.03 MiB at 32K and 175.03 MiB at 128K for Gemma 4 E4B at
    ubatch 512 (120.02 and 312.02 MiB without flash attention, whose mask is f32)."""
    width = (arch.hidden_size or 4096) + 2 * (arch.per_layer_input_size or 0) * arch.num_hidden_layers
    mask = n_ubatch * (n_ctx if n_ctx_seq is None else n_ctx_seq) * _mask_bytes(flash_attn)
    return math.ceil((n_ubatch * width * 4 + mask) * LLAMACPP_COMPUTE_MARGIN)
