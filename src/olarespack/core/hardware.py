"""Named GPU profiles shipped with the package (no network: the facts travel with the code)."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field


class HardwareProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title: str
    gpu_memory_mib: int = Field(gt=0, description="Device memory the driver reports and HAMi registers, in MiB.")
    booking_mib: int = Field(gt=0, description="GPU memory an app books by default, in MiB (below the device).")
    bandwidth_gb_s: int = Field(gt=0, description="Memory bandwidth in GB/s.")
    compute_capability: str


@cache
def profiles() -> dict[str, HardwareProfile]:
    text = resources.files("olarespack").joinpath("data/hardware.yaml").read_text(encoding="utf-8")
    raw: dict[str, dict[str, object]] = yaml.safe_load(text)
    return {name: HardwareProfile.model_validate({"name": name, **facts}) for name, facts in raw.items()}
