"""What a plan is made of: app specs, or a box file (a hardware profile, what the box keeps, and the apps that
should co-run), read into the apps shares.py places, each with its fit at any share."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from olarespack.core.errors import Problem, SpecError, UsageError
from olarespack.core.hardware import HardwareProfile, OlaresDriver, driver_for, olares_drivers, profiles
from olarespack.core.yamlfile import load_spec_data
from olarespack.engines.fit import FitReport
from olarespack.fit.budget import fit_report, spec_calibration
from olarespack.fit.starts import Starts, market_driver, starts
from olarespack.models.registry import models_for
from olarespack.plan.shares import Plan, PlanApp
from olarespack.release.edit import set_gpu_memory
from olarespack.spec.inplace import editing, read_spec_text, write_spec_text
from olarespack.spec.load import load_edited_spec, load_spec
from olarespack.spec.models import AppSpec, ByteRange
from olarespack.write import Status

BOX_KEYS = ("hardware", "olares", "keep_mib", "apps")
MIB = 2**20
MAX_APPS = 16  # more apps than any one GPU runs; bounds what a stranger's box file makes olarespack compute


@dataclass(frozen=True)
class Box:
    """A box file: its hardware profile, what the box keeps (None: the profile's default), the spec files
    of the apps that should co-run, in priority order, and the driver of the Olares it runs (None: not said)."""

    file: str
    hardware: str | None
    keep_mib: int | None
    apps: tuple[Path, ...]
    driver: OlaresDriver | None = None


def _refuse(file: str, where: str, message: str, fix: str, rule: str) -> SpecError:
    return SpecError([Problem(file, where, message, fix, rule=rule)])


def read_box(path: Path) -> Box:
    """A box file; a SpecError naming the field and the fix for anything else. App paths are relative to the
    box file's folder."""
    shown = str(path)
    data = load_spec_data(path)
    if not isinstance(data, dict):
        raise _refuse(
            shown,
            "",
            "a box file must be a YAML mapping with hardware and apps",
            "start from boxes/olares-one.yaml",
            "yaml",
        )
    unknown = sorted(str(key) for key in data if key not in BOX_KEYS)
    if unknown:
        raise _refuse(shown, unknown[0], "unknown key", f"use only {', '.join(BOX_KEYS)}", "spec-unknown-key")
    hardware = data.get("hardware")
    if hardware is not None and (not isinstance(hardware, str) or hardware not in profiles()):
        raise _refuse(
            shown,
            "hardware",
            f"unknown hardware profile {str(hardware)[:60]!r}",
            f"use one of {', '.join(sorted(profiles()))}",
            "hardware-profile",
        )
    olares = data.get("olares")
    driver = None
    if olares is not None:
        known = ", ".join(olares_drivers())
        driver = driver_for(str(olares)) if isinstance(olares, str) else None
        if driver is None:
            raise _refuse(
                shown,
                "olares",
                f"{str(olares)[:40]!r} is not an Olares release the driver table reaches",
                f'write the release the box runs as a quoted version, e.g. "1.12.3" (known: {known})',
                "spec-format",
            )
    keep = data.get("keep_mib")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise _refuse(
            shown,
            "keep_mib",
            "must be a whole number of MiB, 0 or more",
            "give the GPU memory the box keeps for itself, e.g. 463",
            "spec-type",
        )
    apps = data.get("apps")
    if not isinstance(apps, list) or not apps:
        raise _refuse(
            shown,
            "apps",
            "must be a list of app spec files",
            "list paths such as ../apps/gemma4-audio.yaml",
            "spec-missing" if apps is None else "spec-type",
        )
    if len(apps) > MAX_APPS:
        raise _refuse(shown, "apps", f"more than {MAX_APPS} apps", "plan fewer apps per box", "spec-range")
    files = []
    for index, entry in enumerate(apps):
        if not isinstance(entry, str) or not entry:
            raise _refuse(
                shown,
                f"apps[{index}]",
                "must be the path of an app spec file",
                "write a path relative to the box file",
                "spec-type",
            )
        file = Path(os.path.normpath(path.parent / entry))
        if not file.is_file():
            raise _refuse(
                shown,
                f"apps[{index}]",
                f"no spec file at {file}",
                "write a path relative to the box file's folder",
                "file",
            )
        files.append(file)
    return Box(shown, hardware, keep, tuple(files), driver)


def profile_for(specs: list[tuple[Path, AppSpec]], hardware: str | None) -> HardwareProfile:
    """The named profile, else the one every spec targets."""
    if hardware is not None:
        if hardware not in profiles():
            raise UsageError(f"unknown hardware {hardware!r}: use one of {', '.join(sorted(profiles()))}")
        return profiles()[hardware]
    targets = sorted({spec.hardware for _, spec in specs})
    if len(targets) > 1:
        raise UsageError(f"the apps target different hardware ({', '.join(targets)}): name the box's with --hardware")
    return profiles()[targets[0]]


def load_apps(files: list[Path], hardware: str | None) -> tuple[HardwareProfile, list[PlanApp]]:
    """The specs as apps to place, each with its fit at any share on the profile's card."""
    specs = [(file, load_spec(file)) for file in files]
    seen: dict[str, Path] = {}
    for file, spec in specs:
        if spec.name in seen:
            raise _refuse(
                str(file),
                "name",
                f"{spec.name} is already in the plan from {seen[spec.name]}",
                "list each app once",
                "duplicate-name",
            )
        seen[spec.name] = file
    profile = profile_for(specs, hardware)
    return profile, [_plan_app(file, spec.model_copy(update={"hardware": profile.name})) for file, spec in specs]


def app_starts(files: list[Path], driver: OlaresDriver | None) -> tuple[Starts, ...]:
    """Each app's image against the box's driver (none said: the oldest Olares the market installs on)."""
    driver = driver or market_driver()
    if driver is None:
        return ()
    return tuple(starts(spec.name, spec.engine, driver) for spec in (load_spec(file) for file in files))


def _plan_app(file: Path, spec: AppSpec) -> PlanApp:
    registry = models_for(file)
    calibration: dict[str, Any] = spec_calibration(spec)

    @cache
    def fit_at(mib: int) -> FitReport:
        request = f"{mib}Mi"
        share = ByteRange.model_validate({"request": request, "limit": request})
        resources = spec.resources.model_copy(update={"gpu_memory": share})
        return fit_report(spec.model_copy(update={"resources": resources}), registry=registry, **calibration)

    return PlanApp(spec.name, str(file), spec.gpu_memory(), fit_at)


def write_shares(plan: Plan, source: str) -> list[tuple[str, Status]]:
    """Each app's spec books its planned share (resources.gpu_memory, request = limit), its comment naming the
    plan. Every edit is made before any file is written, so a spec whose layout defeats the edit leaves all of
    them as they were; each file is then replaced in one rename."""
    if not plan.fits:
        raise UsageError("the plan does not fit: no share to write")
    why = "".join(c if c.isprintable() else "?" for c in f"share from `{source}`")[:200]
    for app in plan.apps:
        path = Path(app.file)
        if path.is_symlink() or not path.is_file():  # write_file refuses these: refused before anything is written
            raise _refuse(
                app.file,
                "",
                "not a regular file: its share cannot be written in place",
                "give the spec file itself, not a link to it",
                "plan",
            )
    edits = []
    with editing(*(Path(app.file) for app in plan.apps)):  # from the reads to the writes: no edit is lost
        for app in plan.apps:
            path = Path(app.file)
            text = set_gpu_memory(path, read_spec_text(path), app.gpu_memory_bytes // MIB, why)
            load_edited_spec(text, app.file)  # every edited spec loads before any is written
            edits.append((path, text))
        return [(str(path), write_spec_text(path, text)) for path, text in edits]


def check_writable(files: list[Path], hardware: str | None) -> None:
    """--write books shares for the card the plan was made for: every spec must target it (a share planned on
    another card, written into a spec for this one, would hold nothing)."""
    if hardware is None:
        return
    for file in files:
        target = load_spec(file).hardware
        if target != hardware:
            raise UsageError(
                f"{file} targets {target}, the plan {hardware}: --write books shares only for the "
                "hardware the specs target (leave out --hardware, or change the spec's hardware)"
            )
