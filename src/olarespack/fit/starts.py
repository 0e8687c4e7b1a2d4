"""Will the pod start? The image's CUDA against the box's NVIDIA driver (engines/cuda.py), as fit and plan say
it beside their memory verdict: an image built on a newer CUDA than the driver runs never reaches the GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from olarespack.core.hardware import OlaresDriver, driver_for, olares_drivers
from olarespack.engines import engine_for
from olarespack.engines.base import EngineSpec
from olarespack.engines.cuda import verdict
from olarespack.olares.generations import oldest_market_olares


class Verdict(Protocol):
    @property
    def fits(self) -> bool: ...

    def as_dict(self) -> dict[str, Any]: ...

    def table(self) -> list[str]: ...


@dataclass(frozen=True)
class Starts:
    """One app's image against one driver."""

    app: str
    image: str
    cuda: str | None
    driver: OlaresDriver
    starts: bool
    line: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "image_cuda": self.cuda,
            "olares": self.driver.olares,
            "driver": self.driver.driver,
            "driver_cuda": self.driver.cuda,
            "starts": self.starts,
        }


def market_driver() -> OlaresDriver | None:
    """The driver of the oldest Olares the market installs an app on (both generations published)."""
    oldest = oldest_market_olares(list(olares_drivers()))
    return driver_for(oldest) if oldest else None


def starts(app: str, spec_engine: EngineSpec, driver: OlaresDriver) -> Starts:
    found = engine_for(spec_engine).engine.image_cuda(spec_engine.image)
    ok, line = verdict(found, driver)
    return Starts(app, spec_engine.image, found.cuda, driver, ok, line)


@dataclass(frozen=True)
class WithStarts:
    """A memory verdict (fit's report, a plan) with each app's CUDA line: yes only when it fits and starts."""

    inner: Verdict
    apps: tuple[Starts, ...]

    @property
    def fits(self) -> bool:
        return self.inner.fits and all(app.starts for app in self.apps)

    def as_dict(self) -> dict[str, Any]:
        return {**self.inner.as_dict(), "starts": {app.app: app.as_dict() for app in self.apps}}

    def table(self) -> list[str]:
        lines = self.inner.table()
        # a plan ends with its own verdict line: the apps' CUDA lines go above it
        at = len(lines) - 1 if lines and not lines[-1].startswith(" ") else len(lines)
        lines[at:at] = [f"  {app.app}: {app.line}" if len(self.apps) > 1 else f"  {app.line}" for app in self.apps]
        stopped = [app.app for app in self.apps if not app.starts]
        if stopped:
            lines.append(f"DOES NOT START: {', '.join(stopped)} (the image needs a newer CUDA than the driver)")
        return lines
