"""Which CUDA a llama.cpp image is built on: llama.cpp's official images are tagged `<kind>-<flavour>-b<build>`
(`server-cuda13-b11434`), and releases/cuda-images.json holds, per flavour, the builds its docker.yml was read
at and the CUDA of each run of them (tools/engine_releases/cuda_images.py)."""

from __future__ import annotations

import re
from typing import Any

from olarespack.engines.cuda import REFRESH, ImageCuda, artifact, images_table
from olarespack.engines.images import family_of

_TAG = re.compile(r"^(?P<kind>server|full|light)(?:-(?P<flavour>[a-z0-9]+))?-b(?P<build>\d{1,7})$")
KIND = "llamacpp"


def _split(image: str) -> tuple[str, str] | None:
    """(repository, tag) of a reference with a tag."""
    name = image.split("@", 1)[0]
    repository, colon, tag = name.rpartition(":")
    return (repository, tag) if colon and "/" not in tag else None


def _run(runs: list[dict[str, Any]], build: int) -> dict[str, Any] | None:
    return next((run for run in runs if run["first"] <= build <= run["last"]), None)


def _read_at(table: dict[str, Any], build: int) -> dict[str, Any]:
    """The read of the run's nearest build at or below `build` (its artifact is what a message cites)."""
    reads = [row for row in table.get("reads", []) if row["build"] <= build]
    return reads[-1] if reads else {}


def image_cuda(image: str) -> ImageCuda:
    family = family_of(KIND, image)
    parts = _split(image)
    match = _TAG.match(parts[1]) if parts else None
    if family is None or family.build is None or parts is None or match is None:
        return ImageCuda(
            image,
            None,
            note="not an official llama.cpp image tag (<kind>-<flavour>-b<build>): "
            "a custom build says nothing about its CUDA",
        )
    flavour, build = match.group("flavour") or "cpu", int(match.group("build"))
    table = images_table(KIND)
    flavours: dict[str, list[dict[str, Any]]] = table.get("flavours", {})
    if flavour not in flavours:
        cuda_like = flavour.startswith("cuda")
        return ImageCuda(image, None, note=f"the {flavour} flavour is in no docker.yml read", applies=cuda_like)
    run = _run(flavours[flavour], build)
    others = []
    for other, runs in sorted(flavours.items()):
        if other != flavour and (found := _run(runs, build)) is not None:
            others.append((f"{parts[0]}:{match.group('kind')}-{other}-b{build}", str(found["cuda"])))
    if run is None:
        return ImageCuda(image, None, note=_unknown(flavours[flavour], build, table), others=tuple(others))
    return ImageCuda(
        image, str(run["cuda"]), f"llama.cpp docker.yml, {artifact(_read_at(table, build))}", others=tuple(others)
    )


def _unknown(runs: list[dict[str, Any]], build: int, table: dict[str, Any]) -> str:
    refresh = f"refresh with `{REFRESH.format(kind=KIND)}`"
    if not runs or build > runs[-1]["last"]:
        newest = runs[-1]["last"] if runs else table.get("range", {}).get("last")
        return f"b{build} is newer than every build whose docker.yml was read (newest b{newest}); {refresh}"
    if build < runs[0]["first"]:
        return f"b{build} is older than every build whose docker.yml was read (oldest b{runs[0]['first']})"
    before = max((run for run in runs if run["last"] < build), key=lambda run: run["last"])
    after = min((run for run in runs if run["first"] > build), key=lambda run: run["first"])
    return (
        f"b{build} lies where the base changed, between b{before['last']} (CUDA {before['cuda']}) and "
        f"b{after['first']} (CUDA {after['cuda']}), and no sdist between them carries docker.yml"
    )


def image_at(image: str, release: str) -> str | None:
    """`server-cuda13-b9101` at "b11434" -> `server-cuda13-b11434` (the same repository, kind and flavour)."""
    parts = _split(image)
    match = _TAG.match(parts[1]) if parts else None
    build = re.fullmatch(r"b(\d{1,7})", release)
    if parts is None or match is None or build is None:
        return None
    flavour = f"-{match.group('flavour')}" if match.group("flavour") else ""
    return f"{parts[0]}:{match.group('kind')}{flavour}-b{build.group(1)}"
