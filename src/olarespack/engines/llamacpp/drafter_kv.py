"""A separate llama.cpp drafter's KV cache (`--model-draft` and the forks' drafter flags): its own context over
its own layers, in its own cache types (`-ctkd` / `-ctvd`, f16 unless given), growing with the target's context.
How large that context is, each build says:
- b9101 (tools/server/server-context.cpp): one draft context per slot, `n_parallel = 1`, `n_ctx` the slot's
  context (`llama_n_ctx_seq`) and `n_batch` too, the rest of the params llama.cpp's defaults;
- b11434 (common/speculative.cpp common_speculative_init_result): one draft context for every slot, `n_ctx` the
  target's whole context ("the draft context holds as many tokens per sequence as the target context"), the
  target's slots and batch sizes.
A build between the two is taken as b9101's, and the report says so."""

from __future__ import annotations

from typing import Any

from olarespack.engines.llamacpp.kv import (
    LLAMACPP_DEFAULT_UBATCH,
    llamacpp_compute_bytes,
    llamacpp_context,
    llamacpp_f16_copy_bytes,
    llamacpp_kv_bytes,
)
from olarespack.models.arch import ModelArch

SHARED_SINCE = 11434  # the first build known to give every slot one draft context of the target's size
# GPU memory a draft context takes beyond its weights, KV cache and compute buffer (what the target's runtime
# allowance covers for its own context): 118.2 MiB measured for Gemma 4 E4B's shapes and 16.5 for a dense 8B's, the
# same at every context and slot count (H100, b11434, tests/fixtures/llama-boots/h100-b11434-drafter.json)
DRAFT_CONTEXT_BYTES = 128 * 2**20


def draft_contexts(build: int | None, parallel: int) -> int:
    """How many draft contexts the server makes: one for every slot from b11434, one per slot before."""
    return 1 if build is not None and build >= SHARED_SINCE else parallel


def drafter_kv_bytes(
    arch: ModelArch,
    n: int,
    build: int | None,
    options: dict[str, Any],
    *,
    type_k: str,
    type_v: str,
    swa_full: bool,
    flash_attn: bool,
    type_sizes: dict[str, tuple[int, int]] | None,
) -> int:
    """The drafter's KV bytes when the target runs a context of `n` tokens with these slots and batch sizes."""
    kinds: dict[str, Any] = {
        "type_k": type_k, "type_v": type_v, "swa_full": swa_full, "flash_attn": flash_attn, "type_sizes": type_sizes,
    }  # fmt: skip
    if build is not None and build >= SHARED_SINCE:
        return llamacpp_kv_bytes(arch, n, **options, **kinds)
    per_slot = llamacpp_context(n, **options).n_ctx_seq
    slots = int(options["parallel"])
    one = llamacpp_kv_bytes(
        arch, per_slot, parallel=1, kv_unified=False, batch_size=per_slot, ubatch_size=LLAMACPP_DEFAULT_UBATCH, **kinds
    )
    return slots * one


def drafter_compute_bytes(
    arch: ModelArch,
    n: int,
    build: int | None,
    options: dict[str, Any],
    *,
    type_k: str,
    type_v: str,
    swa_full: bool,
    flash_attn: bool,
) -> int:
    """The drafter's GPU compute buffer (or buffers: one per draft context) when the target runs `n` tokens, by
    the target's estimate over the drafter's layers."""
    kinds: dict[str, Any] = {"type_k": type_k, "type_v": type_v, "swa_full": swa_full, "flash_attn": flash_attn}
    if build is not None and build >= SHARED_SINCE:
        at = llamacpp_context(n, **options)
        copies = llamacpp_f16_copy_bytes(arch, n, **options, **kinds)
        return llamacpp_compute_bytes(
            arch, at.n_ubatch, at.n_ctx, flash_attn=flash_attn, n_ctx_seq=at.n_ctx_seq, f16_copies=copies
        )
    per_slot = llamacpp_context(n, **options).n_ctx_seq
    one_options: dict[str, Any] = {
        "parallel": 1, "kv_unified": False, "batch_size": per_slot, "ubatch_size": LLAMACPP_DEFAULT_UBATCH,
    }  # fmt: skip
    at = llamacpp_context(per_slot, **one_options)
    copies = llamacpp_f16_copy_bytes(arch, per_slot, **one_options, **kinds)
    one = llamacpp_compute_bytes(
        arch, at.n_ubatch, at.n_ctx, flash_attn=flash_attn, n_ctx_seq=at.n_ctx_seq, f16_copies=copies
    )
    return int(options["parallel"]) * one
