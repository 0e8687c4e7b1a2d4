"""Will it fit? One app's GPU memory budget through its engine's arithmetic (each engine package's fit.py),
and what the build checks of it: the context fits (else the largest that does), `auto` contexts resolved,
trained windows respected."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from olarespack.core import quantity
from olarespack.core.errors import ModelDataError, Problem, UnknownModelError, UsageError
from olarespack.core.units import gib
from olarespack.engines import engine_for
from olarespack.engines.fit import FitReport, FitRequest
from olarespack.models.arch import ModelInfo
from olarespack.models.registry import find_model, models_for

if TYPE_CHECKING:
    from olarespack.spec.models import AppSpec


def fit_report(
    spec: AppSpec,
    *,
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    kv_available_bytes: int | None = None,
    calibrated_kv_available_bytes: int | None = None,
    calibrated_at_utilization: float | None = None,
    calibrated_total_bytes: int | None = None,
    registry: dict[str, ModelInfo] | None = None,
) -> FitReport:
    """The GPU memory budget of one app. `kv_available_bytes` replaces the computed KV budget; the calibrated
    pair (the `Available KV cache memory` of one vLLM boot and the utilization it ran at, with the GPU memory
    that boot saw) replaces the estimated non-KV memory. `registry` replaces the shipped model data (keyed by
    repository)."""
    if max_model_len is not None and max_model_len < 1:
        raise UsageError(f"max_model_len must be a positive number of tokens, not {max_model_len}")
    for name, util in (
        ("gpu_memory_utilization", gpu_memory_utilization),
        ("calibrated_at_utilization", calibrated_at_utilization),
    ):
        if util is not None and not 0 < util <= 1:
            raise UsageError(f"{name} must be in (0, 1], not {util}")
    if (calibrated_kv_available_bytes is None) != (calibrated_at_utilization is None):
        raise UsageError("calibration needs both the measured available KV bytes and the utilization of that boot")
    if kv_available_bytes is not None and calibrated_kv_available_bytes is not None:
        raise UsageError("give either kv_available_bytes or a calibration, not both")
    engine = engine_for(spec.engine)
    # the target first, so an unknown model's message names the command for its kind of files
    find_model(engine.model_repo(), registry, gguf_files=engine.model_files())
    total = spec.gpu_memory()  # the engine sees the GPU memory it books as the device
    return engine.fit(
        FitRequest(
            total,
            app=spec.name,
            hardware=spec.hardware,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_available_bytes=kv_available_bytes,
            calibrated_kv_available_bytes=calibrated_kv_available_bytes,
            calibrated_at_utilization=calibrated_at_utilization,
            calibrated_total_bytes=calibrated_total_bytes,
            registry=registry,
        )
    )


def spec_calibration(spec: AppSpec) -> dict[str, Any]:
    """fit_report's calibration arguments from the boot measurement a spec carries (none: {})."""
    return engine_for(spec.engine).calibration()


def resolve_context(file: str, spec: AppSpec) -> tuple[AppSpec, list[Problem]]:
    """What the build checks: the context fits the GPU (else an error naming the largest that does and the
    utilization that would be needed), an `auto` context becomes that largest context, and a context past
    the model's trained window is a warning."""
    engine = engine_for(spec.engine)
    path = f"engine.{engine.context_field}"
    auto = engine.auto_context()
    try:
        registry = models_for(file)
    except ModelDataError as exc:  # a broken models/ file is the project's input error, like a broken spec
        return spec, [
            Problem(
                file,
                "",
                f"cannot read the project's model data: {exc}",
                "fix or remove that file in models/",
                rule="model-data",
            )
        ]
    try:
        report = fit_report(spec, registry=registry, **spec_calibration(spec))
    except ModelDataError as exc:
        if isinstance(exc, UnknownModelError):
            message = f"cannot check that the context fits the GPU: olarespack has no data for {exc.repo}"
            fix = f"run `{exc.command}` in the project root (it writes models/<name>.yaml beside apps/)"
        else:
            message, fix = f"cannot check that the context fits the GPU: {exc}", "correct the model's data"
        problem = Problem(file, path, message, fix, rule="context-fit", severity="error" if auto else "warning")
        return spec, [problem]
    if auto:
        if report.max_model_len_fit < 1:
            fraction = engine.engine.memory_fraction
            return spec, [
                Problem(
                    file,
                    path,
                    "no context fits: the weights alone exceed the GPU budget",
                    f"raise {fraction} or pick a smaller model" if fraction else "pick a smaller model",
                    rule="context-fit",
                )
            ]
        resolved = engine.with_context(report.max_model_len_fit)
        return (
            spec.model_copy(update={"engine": resolved}),
            _window_problems(file, path, spec, report.max_model_len_fit, registry),
        )
    problems = (
        _window_problems(
            file, path, spec, report.max_model_len, registry, _int_setting(report.settings.get("n_ctx_per_slot"))
        )
        + _host_problems(file, spec, report)
        + _unused_booking(file, spec, report)
    )
    if report.over_total_bytes:
        problems.append(
            Problem(
                file,
                "engine.kv_cache_memory_bytes",
                f"the fixed KV cache ({gib(report.kv_cache_available_bytes):.2f} GiB) and the rest of the engine's "
                f"memory ({gib(report.overhead_bytes + report.weights_bytes + report.drafter_weights_bytes):.2f} "
                f"GiB) exceed the {gib(report.total_bytes):.2f} GiB {spec.hardware} gives the app by "
                f"{gib(report.over_total_bytes):.2f} GiB: the engine runs out of memory at start-up",
                f"use at most {gib(report.kv_cache_available_bytes - report.over_total_bytes):.2f} GiB "
                "(engine.kv_cache_memory_bytes), or book more GPU memory",
                rule="kv-bytes-over-booking",
            )
        )
    elif not report.fits:
        fix = f"use at most {report.max_model_len_fit} tokens"
        if report.utilization_needed is not None and report.gpu_memory_utilization is not None:
            fix += f", or {engine.engine.memory_fraction} {report.utilization_needed:g}"
        if engine.engine.accepts_auto_context:
            fix += f", or {engine.context_field}: auto"
        why = "".join(f" ({reason})" for reason, _ in report.context_fixes)
        fix += "".join(f", or {keep}" for _, keep in report.context_fixes)
        problems.append(
            Problem(
                file,
                path,
                f"{report.max_model_len} tokens need {gib(report.kv_cache_needed_bytes):.2f} GiB of KV "
                f"cache but {gib(max(report.kv_cache_available_bytes, 0)):.2f} GiB are available on {spec.hardware}"
                + why,
                fix,
                rule="context-fit",
            )
        )
    return spec, problems


def _int_setting(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


UNUSED_BOOKING_FRACTION = 0.5  # booked memory an engine that takes only what it needs leaves unused, at most


def _unused_booking(file: str, spec: AppSpec, report: FitReport) -> list[Problem]:
    """An engine with no memory fraction (llama.cpp) allocates what its context needs whatever it is given: a
    booking far above that stays unused, and Olares counts it as taken when the next app installs."""
    if report.memory_fraction is not None or not report.fits:
        return []
    need, booked = report.total_needed_bytes, report.total_bytes
    if booked - need <= booked * UNUSED_BOOKING_FRACTION:
        return []
    return [
        Problem(
            file,
            "resources.gpu_memory",
            f"books {gib(booked):.2f} GiB of GPU memory for {report.engine_title}, which takes only the "
            f"{gib(need):.2f} GiB its context needs: the rest stays booked and unused, and Olares counts it "
            "as taken when the next GPU app installs",
            f"run `olarespack plan --write {file}` to book its share",
            rule="gpu-booking-unused",
            severity="warning",
        )
    ]


def _host_problems(file: str, spec: AppSpec, report: FitReport) -> list[Problem]:
    """The container's memory against what the engine holds in host memory: a limit below it gets the pod
    killed for memory at boot, a request below it lets the scheduler place the pod where the memory is not."""
    need = report.host_memory_bytes
    if need is None:
        return []
    needed = f"{report.engine_title} holds {gib(need):.2f} GiB of host memory (input embeddings and pinned buffers)"
    problems = []
    severities: tuple[tuple[str, Literal["error", "warning"]], ...] = (("limit", "error"), ("request", "warning"))
    for field_name, severity in severities:
        given = quantity.parse_bytes(getattr(spec.resources.memory, field_name))
        if given < need:
            problems.append(
                Problem(
                    file,
                    f"resources.memory.{field_name}",
                    f"{needed}; the {field_name} is {gib(given):.2f} GiB",
                    f"set resources.memory.{field_name} to at least {-(-need // 2**30)}Gi",
                    rule="host-memory",
                    severity=severity,
                )
            )
    return problems


def _window_problems(
    file: str, path: str, spec: AppSpec, asked: int, registry: dict[str, ModelInfo], per_slot: int | None = None
) -> list[Problem]:
    engine = engine_for(spec.engine)
    repo = engine.model_repo()
    try:
        info = find_model(repo, registry)
    except ModelDataError:
        return []
    positions = info.arch.max_position_embeddings if info.arch else None
    slot = per_slot or asked
    if positions is not None and engine.engine.caps_slot_context and slot > positions:
        slots = max(1, asked // slot)
        return [
            Problem(
                file,
                path,
                f"a slot of {slot} tokens is past {repo}'s {positions} positions: {engine.title} boots, allocates the "
                f"KV cache for every cell, and caps each slot at {positions} (the cells past it are booked and never "
                "used)",
                f"use at most {positions * slots}" + (f" for {slots} slots" if slots > 1 else ""),
                rule="context-window",
                severity="warning",
            )
        ]
    if positions is not None and not engine.engine.caps_slot_context and asked > positions:
        return [
            Problem(
                file,
                path,
                f"{asked} is past {repo}'s {positions} positions: {engine.title} refuses to boot",
                f"use at most {positions}",
                rule="context-window",
            )
        ]
    trained = info.trained_context
    if trained is not None and asked > trained:
        return [
            Problem(
                file,
                path,
                f"{asked} is past the {trained} tokens {repo} was trained for: it runs, "
                "but recall past that is unreliable",
                f"use {trained} unless you need more",
                rule="context-window",
                severity="warning",
            )
        ]
    return []
