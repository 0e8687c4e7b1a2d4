"""Engine images as families (each engine package's images.yaml): which server an image runs, its build, and the
capabilities a fork adds (speculative types, KV cache types), so the rules check a fork's flags and pass a
custom build's through."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

# ggml's own KV cache types: (bytes per block, values per block)
GGML_CACHE_TYPES: dict[str, tuple[int, int]] = {
    "f32": (4, 1),
    "f16": (2, 1),
    "bf16": (2, 1),
    "q8_0": (34, 32),
    "q4_0": (18, 32),
    "q4_1": (20, 32),
    "iq4_nl": (18, 32),
    "q5_0": (22, 32),
    "q5_1": (24, 32),
}


@dataclass(frozen=True)
class SpecType:
    drafter_flag: str | None  # the flag naming the drafter file; None: the drafter is inside the model file
    min_build: int | None = None


@dataclass(frozen=True)
class CacheType:
    block_bytes: int
    block_values: int
    estimate: bool = False


@dataclass(frozen=True)
class ImageFamily:
    name: str
    engine: str
    patterns: tuple[str, ...]
    command: tuple[str, ...]
    entrypoint: tuple[str, ...] | None = None  # what runs when a container gives no command (None: unknown)
    build: str | None = None  # regex on the tag: llama.cpp build number
    release: str | None = None  # regex on the tag: a llama.cpp semantic-version release (llamacpp/semver.py)
    version: str | None = None  # regex on the tag: vLLM release
    flags: tuple[str, ...] = ()  # options a fork adds to its base release's (besides its drafter flags)
    based_on: str | None = None  # a fork's upstream release ("b9246", "0.21.0"): the table its flags are checked by
    spec_types: dict[str, SpecType] = field(default_factory=dict)
    cache_types: dict[str, CacheType] = field(default_factory=dict)

    def build_number(self, image: str) -> int | None:
        tag = _tag(image)
        match = re.search(self.build, tag) if self.build and tag else None
        return int(match.group(1)) if match else None

    def all_cache_types(self) -> dict[str, CacheType]:
        own = {name: CacheType(size, values) for name, (size, values) in GGML_CACHE_TYPES.items()}
        return {**own, **self.cache_types}


def _tag(image: str) -> str | None:
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else None


def _short(image: str) -> str:
    """registry/path:tag without docker.io/ and library/, the way the patterns are written."""
    name = image.split("@", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name.removeprefix("library/")


@cache
def families() -> dict[str, tuple[ImageFamily, ...]]:
    """Each engine package's families (engines/<kind>/images.yaml), keyed by its kind, in the order of the folders."""
    raw: dict[str, list[dict[str, Any]]] = {
        folder.name: yaml.safe_load(folder.joinpath("images.yaml").read_text(encoding="utf-8"))
        for folder in sorted(resources.files("olarespack.engines").iterdir(), key=lambda f: f.name)
        if folder.joinpath("images.yaml").is_file()
    }
    found: dict[str, tuple[ImageFamily, ...]] = {}
    for engine, entries in raw.items():
        found[engine] = tuple(
            ImageFamily(
                name=entry["name"],
                engine=engine,
                patterns=tuple(entry["patterns"]),
                command=tuple(entry["command"]),
                entrypoint=tuple(entry["entrypoint"]) if entry.get("entrypoint") else None,
                build=entry.get("build"),
                release=entry.get("release"),
                version=entry.get("version"),
                based_on=entry.get("based_on"),
                flags=tuple(entry.get("flags") or ()),
                spec_types={k: SpecType(**v) for k, v in (entry.get("spec_types") or {}).items()},
                cache_types={k: CacheType(**v) for k, v in (entry.get("cache_types") or {}).items()},
            )
            for entry in entries
        )
    return found


def family_of(engine: str, image: str) -> ImageFamily | None:
    """The family of an image for an engine kind; None for a custom build no family describes."""
    short = _short(image)
    for family in families().get(engine, ()):
        if any(fnmatch.fnmatchcase(short, pattern) for pattern in family.patterns):
            return family
    return None


def engine_of_image(image: str) -> ImageFamily | None:
    """The family of an image whatever its engine (import: which engine a chart runs)."""
    for engine in families():
        if (family := family_of(engine, image)) is not None:
            return family
    return None
