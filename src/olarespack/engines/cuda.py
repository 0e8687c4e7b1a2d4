"""Which CUDA an engine image is built on (each engine package's `releases/cuda-images.json`, written by
tools/engine_releases/cuda_images.py from the engine's own release artifacts), against the CUDA the box's
NVIDIA driver runs: an image built on a newer CUDA does not start there.

CUDA is compared by major.minor: an image on 13.1.1 carries NVIDIA_REQUIRE_CUDA `cuda>=13.1`, which a
driver for CUDA 13.1 satisfies; one on 13.3.0 needs a CUDA 13.3 driver.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from olarespack.core.errors import Problem
from olarespack.core.hardware import OlaresDriver

REFRESH = "python tools/engine_releases/cuda_images.py {kind}"


@dataclass(frozen=True)
class ImageCuda:
    """An image's CUDA, where that is known from, and the same release's other images with theirs."""

    image: str
    cuda: str | None  # "13.4.1"; None: not known (`note` says why)
    source: str = ""  # the artifact that says it, for messages
    note: str = ""
    others: tuple[tuple[str, str], ...] = ()  # (image, its CUDA) of the same release in other flavours
    applies: bool = True  # False: not a CUDA image (a CPU or Vulkan build): nothing to compare

    def runnable(self, driver: OlaresDriver) -> str | None:
        """The image of the same release with the newest CUDA the driver runs (a flavour named by its CUDA
        major, `server-cuda12-...`, before an alias of it)."""
        fitting = [
            (cuda_key(cuda), bool(re.search(r"cuda\d", image)), image)
            for image, cuda in self.others
            if not newer(cuda, driver.cuda)
        ]
        return max(fitting)[2] if fitting else None


def cuda_key(version: str) -> tuple[int, int]:
    """major.minor of a CUDA version ("13.4.1" -> (13, 4))."""
    major, minor = [*(int(part) for part in re.findall(r"\d+", version)[:2]), 0, 0][:2]
    return major, minor


def newer(image_cuda: str, driver_cuda: str) -> bool:
    """Whether an image's CUDA needs a newer driver than one for `driver_cuda`."""
    return cuda_key(image_cuda) > cuda_key(driver_cuda)


@cache
def images_table(kind: str) -> dict[str, Any]:
    """An engine's committed image table ({} when it has none)."""
    entry = resources.files("olarespack").joinpath(f"engines/{kind}/releases/cuda-images.json")
    if not entry.is_file():
        return {}
    found: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return found


def artifact(row: dict[str, Any]) -> str:
    return f"{row.get('file', '?')}, sha256 {str(row.get('sha256', '?'))[:12]}"


def check(file: str, found: ImageCuda, driver: OlaresDriver, kind: str, title: str, where: str = "") -> Problem | None:
    """An image that needs a newer CUDA than the driver runs: an error naming both and the image that would
    run (a warning where the driver is assumed); an image whose CUDA is not known: a warning. `where` says
    why this driver ("the oldest Olares the app's charts admit")."""
    if not found.applies:
        return None
    box = f"{driver.title}{where}"
    if found.cuda is None:
        return Problem(
            file,
            "engine.image",
            f"which CUDA {found.image} is built on is not known ({found.note}); "
            f"an image on a CUDA newer than {driver.cuda} does not start with {box}",
            "use an image whose CUDA the tables know"
            if "refresh with" in found.note
            else f"use an image whose tag names its CUDA, or check that its NVIDIA_REQUIRE_CUDA asks for CUDA "
            f"{driver.cuda} or older",
            rule="image-cuda",
            severity="warning",
        )
    if not newer(found.cuda, driver.cuda):
        return None
    runnable = found.runnable(driver)
    fix = (
        f"use {runnable} (the same {title} release)"
        if runnable
        else f"use a {title} image built on CUDA {driver.cuda} or older"
    )
    needs = ".".join(map(str, cuda_key(found.cuda)))
    return Problem(
        file,
        "engine.image",
        f"{found.image} is built on CUDA {found.cuda} ({found.source}), newer than "
        f"{box}: the container does not start there (NVIDIA's prestart hook refuses it, "
        f"`unsatisfied condition: cuda>={needs}`, or a GeForce card falls back to the CPU)",
        fix,
        rule="image-cuda",
        severity="warning" if driver.assumed_from else "error",
    )


def verdict(found: ImageCuda, driver: OlaresDriver) -> tuple[bool, str]:
    """(starts, one line) for fit and plan: the image's CUDA against the box's driver."""
    if not found.applies:
        return True, f"CUDA: {found.image} is not a CUDA image"
    if found.cuda is None:
        return True, f"CUDA: not known for {found.image} ({found.note}); the box has {driver.title}"
    if not newer(found.cuda, driver.cuda):
        return True, f"CUDA: image {found.cuda}, {driver.title}: starts"
    runnable = found.runnable(driver)
    instead = f"; {runnable} would" if runnable else ""
    if driver.assumed_from:
        return True, f"CUDA: image {found.cuda}, {driver.title}: may not start{instead}"
    return False, f"CUDA: image {found.cuda}, {driver.title}: DOES NOT START{instead}"
