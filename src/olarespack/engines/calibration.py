"""Calibrations: what one boot of an engine measured on the box, and what it was measured on.

A calibration replaces fit's estimates with measured memory, so it holds only for the boot it came from: the
model, the image (the engine release) and the GPU profile are recorded with it, and a spec whose model, image or
hardware differs from them is refused (`calibration_problems`, shared by both engines).

Each engine's calibration model derives from MeasuredOn and lives in its package; boot logs are read in
engines/bootlog.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from pydantic import Field, StringConstraints

from olarespack.core.errors import Problem
from olarespack.core.types import HfRepo, Image, StrictModel

ProfileName = Annotated[str, StringConstraints(max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
DeviceName = Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
MiB = Annotated[float, Field(ge=0, le=16_777_216)]
MEASURED_ON = ("model", "image", "hardware")


class MeasuredOn(StrictModel):
    """What a boot was measured on; a calibration holds for these and nothing else."""

    model: HfRepo | None = Field(None, description="The model repository of the measured boot.")
    image: Image | None = Field(None, description="The engine image of the measured boot.")
    hardware: ProfileName | None = Field(None, description="The hardware profile (GPU) of the measured boot.")


def calibration_problems(
    file: str, spec_engine_model_repo: str, image: str, hardware: str, calibration: MeasuredOn | None
) -> Iterator[Problem]:
    """A calibration must say what it was measured on, and that must be what the spec runs now."""
    if calibration is None:
        return
    path = "engine.calibration"
    remeasure = (
        f"boot the app on the box and run `olarespack calibrate {file} --log boot.log` with its log "
        "(kubectl logs), or remove engine.calibration to fall back to the estimate"
    )
    missing = [name for name in MEASURED_ON if getattr(calibration, name) is None]
    if missing:
        yield Problem(
            file,
            path,
            f"does not say what it was measured on ({', '.join(missing)} missing); a "
            "measurement holds only for the model, image and GPU of its boot",
            f"add {', '.join(f'{name}:' for name in missing)} as they were at that boot, or {remeasure}",
            rule="calibration-provenance",
        )
    now = {"model": spec_engine_model_repo, "image": image, "hardware": hardware}
    changed = [
        name
        for name in MEASURED_ON
        if getattr(calibration, name) is not None and getattr(calibration, name) != now[name]
    ]
    if changed:
        shown = "; ".join(f"{name} {getattr(calibration, name)} (the spec has {now[name]})" for name in changed)
        yield Problem(
            file,
            path,
            f"was measured with another {' and '.join(changed)}: {shown}; its memory figures do not hold for this spec",
            remeasure,
            rule="calibration-stale",
        )
