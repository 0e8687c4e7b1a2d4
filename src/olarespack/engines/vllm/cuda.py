"""Which CUDA a vLLM image is built on: a `-cuNNN` tag names it (`v0.21.0-cu129` = CUDA 12.9, `-cu130` = 13.0);
a release tag without one is the release's default image, whose CUDA is docker/Dockerfile's `ARG CUDA_VERSION`
default, read per release into releases/cuda-images.json (tools/engine_releases/cuda_images.py)."""

from __future__ import annotations

import re
from typing import Any

from olarespack.engines.cuda import REFRESH, ImageCuda, artifact, images_table
from olarespack.engines.images import family_of

KIND = "vllm"
_SUFFIX = re.compile(r"-cu(\d{1,2})(\d)(?=-|$)")
_RELEASE = re.compile(r"^v(\d+)\.(\d+)\.\d+")


def _tag(image: str) -> str | None:
    name = image.split("@", 1)[0]
    _, colon, tag = name.rpartition(":")
    return tag if colon and "/" not in tag else None


def image_cuda(image: str) -> ImageCuda:
    tag = _tag(image)
    if family_of(KIND, image) is None or tag is None:
        return ImageCuda(image, None, note="not a vllm/vllm-openai image: a custom build says nothing about its CUDA")
    release = _RELEASE.match(tag)
    rows: list[dict[str, Any]] = images_table(KIND).get("releases", [])
    row = next((r for r in rows if release and r["minor"] == f"{release.group(1)}.{release.group(2)}"), None)
    others = tuple(
        (f"{image.split('@', 1)[0].rpartition(':')[0]}:{release.group(0)}-{suffix}", _named(suffix))
        for suffix in (row or {}).get("suffixes", ())
        if release and f"-{suffix}" not in tag
    )
    suffix = _SUFFIX.search(tag)
    if suffix:
        return ImageCuda(image, f"{int(suffix.group(1))}.{suffix.group(2)}", "the tag's -cu suffix", others=others)
    if release is None:
        return ImageCuda(image, None, note=f"the tag {tag!r} names neither a release nor a -cuNNN CUDA")
    if row is None:
        return ImageCuda(
            image,
            None,
            note=f"no vLLM {release.group(1)}.{release.group(2)} in the image table; "
            f"refresh with `{REFRESH.format(kind=KIND)}`",
        )
    return ImageCuda(image, str(row["default_cuda"]), f"vLLM's docker/Dockerfile, {artifact(row)}", others=others)


def _named(suffix: str) -> str:
    found = _SUFFIX.search(f"-{suffix}")
    return f"{int(found.group(1))}.{found.group(2)}" if found else "?"


def image_at(image: str, release: str) -> str | None:
    """`v0.21.0-cu129` at "0.33" -> `v0.33.0-cu129` where that release publishes the suffix, else `v0.33.0` (a
    preview tag naming no release too); the patch is the one the image table read for that minor."""
    tag = _tag(image)
    if family_of(KIND, image) is None or tag is None:
        return None
    rows: list[dict[str, Any]] = images_table(KIND).get("releases", [])
    row = next((r for r in rows if r["minor"] == release), None)
    version = str(row["package"]).split("==", 1)[1] if row else f"{release}.0"
    suffix = _SUFFIX.search(tag)
    named = suffix.group(0).lstrip("-") if suffix else None
    keep = f"-{named}" if named and named in (row or {}).get("suffixes", ()) else ""
    return f"{image.split('@', 1)[0].rpartition(':')[0]}:v{version}{keep}"
