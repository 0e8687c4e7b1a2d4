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


class OlaresDriver(BaseModel):
    """The NVIDIA driver an Olares release installs (data/olares-drivers.yaml) and the newest CUDA it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    olares: str
    driver: str
    cuda: str = Field(pattern=r"^\d+\.\d+$", description="The newest CUDA major.minor the driver runs.")
    source: str
    assumed_from: str | None = None  # the release whose driver is assumed for one the table lacks

    @property
    def title(self) -> str:
        """As a message names it: `driver 590.44.01 = CUDA 13.1 on Olares 1.12.3`."""
        where = f"Olares {self.olares}" + (
            f" (its driver not known: {self.assumed_from}'s, drivers only get newer)" if self.assumed_from else ""
        )
        return f"driver {self.driver} = CUDA {self.cuda} on {where}"


def release_key(version: str) -> tuple[int, ...] | None:
    """An Olares release as a sortable key: "1.12.6" -> (1, 12, 6); None when it is not one."""
    parts = version.strip().removeprefix("v").split("-", 1)[0].split(".")
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() and len(part) <= 6 for part in parts):
        return None
    return tuple(int(part) for part in parts) + (0,) * (3 - len(parts))


@cache
def olares_drivers() -> dict[str, OlaresDriver]:
    """Every Olares release the table knows, oldest first."""
    text = resources.files("olarespack").joinpath("data/olares-drivers.yaml").read_text(encoding="utf-8")
    raw: dict[str, dict[str, object]] = yaml.safe_load(text)
    found = {str(name): OlaresDriver.model_validate({"olares": str(name), **facts}) for name, facts in raw.items()}
    return dict(sorted(found.items(), key=lambda item: release_key(item[0]) or ()))


def driver_for(olares: str) -> OlaresDriver | None:
    """The driver of an Olares release: the table's, else the nearest older release's (marked assumed); None
    for a release older than every one the table knows."""
    key = release_key(olares)
    if key is None:
        return None
    older = [driver for name, driver in olares_drivers().items() if (release_key(name) or ()) <= key]
    if not older:
        return None
    found = older[-1]
    return (
        found
        if release_key(found.olares) == key
        else found.model_copy(update={"olares": olares, "assumed_from": found.olares})
    )
