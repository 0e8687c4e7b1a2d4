"""Will a llama.cpp app fit its GPU: the GGUF files' sizes, llama-server's KV cache allocation (kv.py) and
its estimated (or calibrated) compute buffers, within the whole memory the engine sees."""

from __future__ import annotations

from typing import Any

from olarespack.core.errors import ModelDataError, UsageError
from olarespack.core.units import MiB, gib, largest_fitting, share_needed
from olarespack.engines.fit import FitReport, FitRequest, Source
from olarespack.engines.images import family_of
from olarespack.engines.llamacpp.drafter_kv import (
    DRAFT_CONTEXT_BYTES,
    SHARED_SINCE,
    draft_contexts,
    drafter_compute_bytes,
    drafter_kv_bytes,
)
from olarespack.engines.llamacpp.flags import spec_type
from olarespack.engines.llamacpp.kv import (
    LLAMACPP_AUTO_PARALLEL,
    LLAMACPP_COMPUTE_MARGIN,
    LLAMACPP_DEFAULT_BATCH,
    LLAMACPP_DEFAULT_UBATCH,
    LLAMACPP_RUNTIME_BYTES,
    MMPROJ_COMPUTE_BYTES,
    llamacpp_compute_bytes,
    llamacpp_context,
    llamacpp_f16_copy_bytes,
    llamacpp_host_compute_bytes,
    llamacpp_kv_bytes,
)
from olarespack.engines.llamacpp.semver import image_build
from olarespack.engines.llamacpp.spec import FULL_PRECISION_CACHE, LlamaCppEngine
from olarespack.models.arch import ModelArch
from olarespack.models.registry import find_model, models


def _has(args: list[str], *names: str) -> bool:
    return any(a in names for a in args)


def fit(engine: LlamaCppEngine, request: FitRequest) -> FitReport:
    family = family_of("llamacpp", engine.image)
    sizes = {name: (c.block_bytes, c.block_values) for name, c in family.all_cache_types().items()} if family else None
    if request.calibrated_kv_available_bytes is not None:
        raise UsageError("calibration from `Available KV cache memory` applies to vLLM apps only")
    info = find_model(engine.model.repo, request.registry)
    if info.arch is None:
        raise ModelDataError(f"{info.repo} has no KV layers of its own: llama.cpp cannot serve it alone")
    arch = info.arch
    notes: list[str] = []
    files = [engine.model.file] + ([engine.model.mmproj] if engine.model.mmproj else [])
    missing = [f for f in files if f not in info.files]
    if missing:
        raise ModelDataError(
            f"no size for {', '.join(missing)} in {info.repo}; known files: {', '.join(sorted(info.files)) or 'none'}"
        )
    main = info.files[engine.model.file]
    if not main.gpu_copy_bytes <= main.host_bytes <= main.bytes:
        raise ModelDataError(
            f"{info.repo}: files.{engine.model.file}: gpu_copy_bytes <= host_bytes <= bytes does "
            "not hold; correct the model file (olarespack model add ... --force rewrites it)"
        )
    # the host mapping holds the input embeddings; the GPU holds the rest, plus token_embd again when tied
    weights = main.bytes - main.host_bytes + main.gpu_copy_bytes + sum(info.files[f].bytes for f in files[1:])
    exact = main.exact and main.host_exact and all(info.files[f].exact for f in files[1:])
    if main.host_bytes:
        copied = (
            f", {gib(main.gpu_copy_bytes):.2f} GiB of it (token_embd) also on the GPU as the tied output"
            if main.gpu_copy_bytes
            else ""
        )
        notes.append(
            f"{gib(main.host_bytes):.2f} GiB of input embeddings (token_embd and any per-layer table) "
            f"stay in host memory{copied}"
        )
    cache_types = family.all_cache_types() if family else {}
    if family and any(
        cache_types[name].estimate for name in (engine.cache_type_k, engine.cache_type_v) if name in cache_types
    ):
        notes.append(f"the storage of the {family.name} KV cache types is an estimate")
    drafter = engine.speculative.drafter if engine.speculative else None
    drafter_bytes = 0
    drafter_arch: ModelArch | None = None
    if drafter is not None:
        drafter_info = (models() if request.registry is None else request.registry).get(drafter.repo)
        if drafter_info is not None and drafter.file in drafter_info.files:
            # as the target's: its input embeddings stay in host memory, the tied output copied to the GPU
            dfile = drafter_info.files[drafter.file]
            drafter_bytes = dfile.bytes - dfile.host_bytes + dfile.gpu_copy_bytes
            drafter_arch = drafter_info.arch
        else:
            notes.append(
                f"drafter {drafter.repo}/{drafter.file}: no size known, not counted "
                f"(olarespack model add {drafter.repo} --gguf {drafter.file})"
            )
    weights += drafter_bytes
    length = request.max_model_len or engine.ctx_size
    if not length:
        length = info.trained_context
        if not length:
            raise ModelDataError(
                f"ctx_size is not written, so llama-server takes {info.repo}'s trained context, "
                "which its model data does not say; set engine.ctx_size"
            )
        notes.append(
            f"ctx_size not written: llama-server takes the context the model was trained with, {length} tokens"
        )
    if engine.parallel is None:
        parallel, unified = LLAMACPP_AUTO_PARALLEL, True
        notes.append(f"--parallel not set: llama-server's {parallel} slots over a unified cache taken")
    else:
        parallel, unified = engine.parallel, _has(engine.extra_args, "--kv-unified", "-kvu")
    swa_full = _has(engine.extra_args, "--swa-full")
    type_k, type_v = engine.cache_type_k or "f16", engine.cache_type_v or "f16"
    flash = engine.flash_attn != "off"
    if type_v not in FULL_PRECISION_CACHE and not flash:
        notes.append("llama.cpp refuses a quantized V cache without flash attention (-fa on)")
    if engine.n_gpu_layers == "auto":
        notes.append(
            "n_gpu_layers auto: llama.cpp keeps on the CPU the layers that do not fit; the figures assume all on GPU"
        )
    elif isinstance(engine.n_gpu_layers, int) and engine.n_gpu_layers <= arch.num_hidden_layers:
        notes.append(f"n_gpu_layers {engine.n_gpu_layers} leaves layers on the CPU; the figures assume all on GPU")
    options: dict[str, Any] = {
        "parallel": parallel,
        "kv_unified": unified,
        "batch_size": engine.batch_size or LLAMACPP_DEFAULT_BATCH,
        "ubatch_size": engine.ubatch_size or LLAMACPP_DEFAULT_UBATCH,
    }

    build = image_build(engine.image)
    draft_build = build
    draft_k = (engine.speculative.cache_type_k if engine.speculative else None) or "f16"
    draft_v = (engine.speculative.cache_type_v if engine.speculative else None) or "f16"
    own_head = drafter is None and arch.nextn_layers > 0 and spec_type(engine) == "draft-mtp"
    if own_head:
        # --spec-type draft-mtp without a drafter file: a second context on the target model whose KV cache holds
        # its MTP layers only, as many tokens as the target's context, in the draft cache types (b11434
        # common/speculative.cpp and llama-model.cpp's layer filter; measured on its CPU server)
        drafter_arch, draft_build = arch.mtp_head(), max(build or 0, SHARED_SINCE)
        notes.append(
            f"the model's own MTP head ({arch.nextn_layers} layer(s)): its KV cache (k {draft_k}, v {draft_v}) in a "
            "context of the target's size"
            + (f" (b{build}: taken as b{SHARED_SINCE}'s)" if build is not None and build < SHARED_SINCE else "")
        )
    elif drafter_arch is not None:
        shared = build is not None and build >= SHARED_SINCE
        notes.append(
            f"the drafter's KV cache (k {draft_k}, v {draft_v}): "
            + ("one context of the target's size for every slot" if shared else "a context of a slot's size per slot")
            + (f" (b{build}: taken as b9101's)" if build is not None and 9101 < build < SHARED_SINCE else "")
            + ("" if build is not None else " (the image's build is unknown: b9101's taken)")
        )

    def drafter_kv_at(n: int) -> int:
        if drafter_arch is None:
            return 0
        return drafter_kv_bytes(
            drafter_arch, n, draft_build, options, type_k=draft_k, type_v=draft_v, swa_full=swa_full, flash_attn=flash,
            type_sizes=sizes,
        )  # fmt: skip

    def kv_at(n: int) -> int:
        return drafter_kv_at(n) + llamacpp_kv_bytes(
            arch, n, type_k=type_k, type_v=type_v, swa_full=swa_full, flash_attn=flash, type_sizes=sizes, **options
        )

    def compute_at(n: int) -> int:  # the GPU compute buffer grows with the context (the KQ mask, the scores,
        at = llamacpp_context(n, **options)  # a quantized cache's f16 copies)
        copies = llamacpp_f16_copy_bytes(
            arch, n, type_k=type_k, type_v=type_v, swa_full=swa_full, flash_attn=flash, **options
        )
        drafted = (
            drafter_compute_bytes(
                drafter_arch,
                n,
                draft_build,
                options,
                type_k=draft_k,
                type_v=draft_v,
                swa_full=swa_full,
                flash_attn=flash,
            )
            if drafter_arch is not None
            else 0
        )
        return drafted + llamacpp_compute_bytes(
            arch, at.n_ubatch, at.n_ctx, flash_attn=flash, n_ctx_seq=at.n_ctx_seq, f16_copies=copies
        )

    ctx = llamacpp_context(length, **options)
    needed = kv_at(length)
    overhead = LLAMACPP_RUNTIME_BYTES + compute_at(length) + (MMPROJ_COMPUTE_BYTES if engine.model.mmproj else 0)
    if drafter_arch is not None:  # each draft context's CUDA graphs and buffers beyond its compute buffer
        overhead += draft_contexts(draft_build, parallel) * DRAFT_CONTEXT_BYTES
    source: Source = "estimate"
    host_compute = llamacpp_host_compute_bytes(arch, ctx.n_ubatch, ctx.n_ctx, flash_attn=flash, n_ctx_seq=ctx.n_ctx_seq)
    notes.append(
        f"compute buffers estimated with a {LLAMACPP_COMPUTE_MARGIN - 1:.0%} margin over the fit to "
        f"measured CUDA boots, CUDA runtime {LLAMACPP_RUNTIME_BYTES // MiB} MiB (an H200's, after a "
        f"first request); {host_compute / MiB:.0f} MiB more of pinned host memory for compute"
    )
    measured = engine.calibration
    if (
        measured is not None
        and (measured.model, measured.image, measured.hardware) == (engine.model.repo, engine.image, request.hardware)
        and measured.model_buffer_mib
    ):
        # the boot's own GPU buffers: weights as loaded, compute buffers as allocated (at that boot's context)
        weights = round(measured.gpu_mib(measured.model_buffer_mib) * MiB)
        overhead = LLAMACPP_RUNTIME_BYTES + round(measured.gpu_mib(measured.compute_buffer_mib) * MiB)
        if drafter_arch is not None:  # the boot's drafter buffers are in its lines; its contexts' own are not
            overhead += draft_contexts(draft_build, parallel) * DRAFT_CONTEXT_BYTES
        exact, source = True, "calibrated"
        notes.append(
            "weights and compute buffers calibrated from a boot"
            + (f" at n_ctx {measured.n_ctx}" if measured.n_ctx else "")
        )
        if measured.n_ctx and measured.n_ctx < ctx.n_ctx:
            # the compute buffer grows with the context: a boot at a smaller one is topped up by the estimate
            overhead += compute_at(length) - compute_at(measured.n_ctx)
            notes.append(f"compute buffer grown by the estimate from n_ctx {measured.n_ctx} to {ctx.n_ctx}")
    if request.kv_available_bytes is not None:
        available, source = request.kv_available_bytes, "given"
        overhead = request.total - weights - available
    else:
        available = request.total - weights - overhead
    fits = available > 0 and needed <= available
    # another context changes the estimated compute buffer too; a calibrated or given budget stays as measured
    grows = source == "estimate"

    def fits_at(n: int) -> bool:
        return kv_at(n) + (compute_at(n) - compute_at(length) if grows else 0) <= available

    # with the estimate, a smaller context also frees compute buffer: search even when the asked one leaves
    # nothing (without flash attention a 128K context's buffer alone can pass the budget)
    searchable = available > 0 or grows
    fit_len = length if fits else (largest_fitting(length, fits_at) if searchable else 0)
    ceiling = max(length, arch.max_position_embeddings or length)
    fit_ctx = llamacpp_context(fit_len, **options) if fit_len else None
    return FitReport(
        app=request.app,
        engine="llamacpp",
        engine_title="llama.cpp",
        model=f"{info.repo}/{engine.model.file}",
        drafter=f"{drafter.repo}/{drafter.file}" if drafter is not None else ("its own MTP head" if own_head else None),
        total_bytes=request.total,
        gpu_memory_utilization=None,
        budget_bytes=request.total,
        weights_bytes=weights,
        drafter_weights_bytes=0,
        overhead_bytes=overhead,
        overhead_source=source,
        kv_cache_needed_bytes=needed,
        drafter_kv_bytes=drafter_kv_at(length),
        kv_cache_available_bytes=available,
        headroom_bytes=available - needed,
        max_model_len=length,
        max_model_len_fit=fit_len,
        max_model_len_limit=largest_fitting(ceiling, fits_at) if searchable else 0,
        concurrency=float(fit_ctx.n_ctx // fit_ctx.n_ctx_seq) if fit_ctx else 0.0,
        fits=fits,
        utilization_needed=share_needed(request.total, weights + overhead + needed),
        kv_cache_dtype=f"k {type_k}, v {type_v}",
        weights_exact=exact,
        settings={
            "n_ctx": ctx.n_ctx,
            "n_ctx_per_slot": ctx.n_ctx_seq,
            "n_ubatch": ctx.n_ubatch,
            "parallel": parallel,
            "kv_unified": unified,
            "swa_full": swa_full,
            "flash_attn": flash,
        },
        host_memory_bytes=main.host_bytes + host_compute,
        notes=tuple(notes),
    )
