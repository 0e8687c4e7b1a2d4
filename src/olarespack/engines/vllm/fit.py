"""Will a vLLM app fit its GPU: vLLM's own KV-cache arithmetic (kv.py) over the model's layers, as the
image's vLLM release computes it, within gpu_memory_utilization of the memory the engine sees, with the non-KV
memory estimated, calibrated from one boot or given."""

from __future__ import annotations

import math

from olarespack.core import quantity
from olarespack.core.errors import ModelDataError
from olarespack.core.units import gib, largest_fitting, share_needed
from olarespack.engines.fit import FitReport, FitRequest, Source
from olarespack.engines.vllm.kv import (
    VLLM_BLOCK_SIZE,
    VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
    Release,
    vllm_cli_settings,
    vllm_kv_dtype_bytes,
    vllm_kv_layout,
    vllm_kv_needed,
    vllm_kv_rules,
    vllm_overhead_estimate,
)
from olarespack.engines.vllm.memory_rules import EXTENSIBLE_SINCE
from olarespack.engines.vllm.spec import MTP_ALIASES, VllmEngine
from olarespack.models.registry import find_model


def fit(engine: VllmEngine, request: FitRequest, release: Release | None = None) -> FitReport:
    """`release`: the image's vLLM release, whose arithmetic is used (None: unknown, the oldest tracked)."""
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
    length = request.max_model_len or (
        engine.max_model_len if engine.max_model_len != "auto" else arch.max_position_embeddings
    )
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
    cli_async, mm_ipc_gib = vllm_cli_settings(engine.extra_args)
    asked_async = engine.async_scheduling if engine.async_scheduling is not None else cli_async
    method = engine.speculative.method if engine.speculative else None
    rules = vllm_kv_rules(release, method=method, async_scheduling=asked_async, mm_ipc_gpu_memory_gb=mm_ipc_gib)
    if release is None:
        notes.append("vLLM release unknown (set engine.version): the arithmetic of 0.21 taken")
    if rules.in_flight_batches > 1:
        notes.append(
            f"async scheduling ({'asked' if asked_async else 'on by default'}): sliding-window layers "
            f"keep {rules.in_flight_batches} batches of {mnbt} tokens in flight; --no-async-scheduling "
            "keeps one"
        )
    in_flight = rules.in_flight_batches * mnbt
    drafted = drafter.arch.layers if drafter and drafter.arch else ()
    if drafter is None and method in MTP_ALIASES | {"mtp"} and arch.nextn_layers:
        # no draft model: vLLM drafts with the target's own MTP layers (the target's path as the draft's; e.g.
        # model_executor/models/glm4_moe_mtp.py builds num_nextn_predict_layers decoder layers past the trunk),
        # each with a KV cache of its own in the same pool
        drafted = arch.mtp_head().layers
        notes.append(f"the model's own MTP layers ({arch.nextn_layers}) draft, each with its own KV cache")
    layers = arch.layers + drafted
    layout = vllm_kv_layout(layers, kv_dtype_bytes=kv_bytes)
    needed = layout.needed(length, in_flight)
    drafter_kv = needed - vllm_kv_needed(
        arch, length, max_num_batched_tokens=mnbt, kv_dtype_bytes=kv_bytes, rules=rules
    )
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
        notes.append(
            f"non-KV memory calibrated from a boot at gpu_memory_utilization "
            f"{request.calibrated_at_utilization:g} ({gib(measured_kv):.2f} GiB available)"
        )
    else:
        non_kv = weights + drafter_weights + vllm_overhead_estimate(arch, mnbt)
        available, source = budget - non_kv, "estimate"
    fixed = quantity.parse_bytes(engine.kv_cache_memory_bytes) if engine.kv_cache_memory_bytes else None
    if fixed is not None:
        # vLLM takes the KV cache's size as given and leaves gpu_memory_utilization out of it: the rest of its
        # memory comes on top, within what the engine sees
        notes.append(
            f"kv_cache_memory_bytes fixes the KV cache at {gib(fixed):.2f} GiB (gpu_memory_utilization does not size "
            f"it); with the rest ({gib(non_kv):.2f} GiB) the engine takes {gib(non_kv + fixed):.2f} GiB"
        )
        available, budget = fixed, non_kv + fixed
    elif release is not None and release >= EXTENSIBLE_SINCE:
        notes.append(
            "vLLM 0.34's extensible KV cache: its size is the memory free after warm-up (CUDA graphs included), "
            "within gpu_memory_utilization; the figures are the profiling estimate, which it replaces"
        )
    if rules.mm_ipc_bytes:
        # carved out after the boot logs its available KV memory: a calibration does not include it
        available -= rules.mm_ipc_bytes
        non_kv += rules.mm_ipc_bytes
        notes.append(f"--mm-ipc-gpu-memory-gb {mm_ipc_gib:g} taken out of the KV cache")
    room = layout.plannable(available, rules)
    over_total = max(0, budget - request.total) if fixed is not None else 0
    fits = room > 0 and needed <= room and not over_total

    def fits_at(n: int) -> bool:
        return layout.needed(n, in_flight) <= room

    fit_len = length if fits else (largest_fitting(length, fits_at) if room > 0 else 0)
    context_fixes: tuple[tuple[str, str], ...] = ()
    if not fits and rules.in_flight_batches > 1:
        one_batch = vllm_kv_rules(release, method=method, async_scheduling=False, mm_ipc_gpu_memory_gb=mm_ipc_gib)
        if layout.needed(length, mnbt) <= layout.plannable(available, one_batch):
            context_fixes = (
                (
                    f"vLLM's async scheduling ({'asked' if asked_async else 'on by default'} here) keeps "
                    f"{rules.in_flight_batches} batches of {mnbt} tokens in flight in the sliding-window "
                    "layers' cache",
                    "engine.async_scheduling: false keeps the context",
                ),
            )
    utilization_needed = share_needed(request.total, non_kv + needed + available - room)
    if fixed is not None:
        utilization_needed = None  # gpu_memory_utilization does not size a fixed cache: its size does
        want = -(-(fixed + max(0, needed - room)) // 2**20) * 2**20
        keeps = layout.plannable(available + want - fixed, rules) >= needed and non_kv + want <= request.total
        if not fits and not over_total and keeps:
            context_fixes += (
                (
                    f"kv_cache_memory_bytes fixes the KV cache at {gib(fixed):.2f} GiB",
                    f"engine.kv_cache_memory_bytes: {want >> 20}Mi keeps the context",
                ),
            )
    ceiling = max(length, arch.max_position_embeddings or length)
    limit = largest_fitting(ceiling, fits_at) if room > 0 else 0
    return FitReport(
        app=request.app,
        engine="vllm",
        engine_title="vLLM",
        memory_fraction="gpu_memory_utilization",
        model=target.repo,
        drafter=drafter.repo if drafter else None,
        total_bytes=request.total,
        gpu_memory_utilization=utilization,
        budget_bytes=budget,
        weights_bytes=weights,
        drafter_weights_bytes=drafter_weights,
        overhead_bytes=non_kv - weights - drafter_weights,
        overhead_source=source,
        kv_cache_needed_bytes=needed,
        drafter_kv_bytes=drafter_kv,
        kv_cache_available_bytes=available,
        headroom_bytes=available - needed,
        max_model_len=length,
        max_model_len_fit=fit_len,
        max_model_len_limit=limit,
        concurrency=layout.concurrency(fit_len, in_flight, available) if fit_len else 0.0,
        fits=fits,
        utilization_needed=utilization_needed,
        kv_cache_dtype=engine.kv_cache_dtype or "auto",
        weights_exact=target.weights_exact,
        settings={
            "block_size": VLLM_BLOCK_SIZE,
            "max_num_batched_tokens": mnbt,
            "kv_dtype_bytes": kv_bytes,
            "vllm_release": ".".join(map(str, release)) if release else "unknown",
            "async_scheduling": rules.async_scheduling,
            "in_flight_batches": rules.in_flight_batches,
            "kv_null_block_reserved": rules.null_block,
            "mm_ipc_bytes": rules.mm_ipc_bytes,
            "kv_layout": layout.mode,
            "kv_groups": len(layout.groups),
            "kv_group_size": layout.group_size,
            "kv_page_bytes": layout.page_bytes,
            "kv_cache_tokens": layout.cache_tokens(max(available, 0)),
        },
        notes=tuple(notes),
        context_fixes=context_fixes,
        over_total_bytes=over_total,
    )
