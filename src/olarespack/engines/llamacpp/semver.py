"""llama.cpp's semantic-version tags (`server-cuda12-v0.3.0`) and the build each one runs.

A release vX.Y.Z is an annotated git tag on one nightly build's commit, and its images are that nightly's
images re-tagged (make-release.yml: `server-cuda-b<N>` -> `server-cuda-v<X.Y.Z>`), so `llama-server --version`
in them prints `X.Y.Z-dev (build N, ...)`. The tree names the version, never which build the tag is on: every
build from the commit that set X.Y.Z in CMakeLists.txt to the next bump says X.Y.Z (0.3.0 from b10616-b10622 to
past b10880). So a tag maps to a build only where the release tables (each records its build's version) leave
one build that can carry it; anywhere else the spec must name the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from olarespack.engines.images import ImageFamily, family_of
from olarespack.engines.releases import ReleaseFacts, tables

_SEMVER = re.compile(r"^v?(\d{1,4})\.(\d{1,4})\.(\d{1,4})$")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _build(facts: ReleaseFacts) -> int:
    return int(facts.release.removeprefix("b"))


@dataclass(frozen=True)
class SemverBuild:
    release: str  # as the tag says it: "v0.3.0"
    version: str  # as CMakeLists.txt says it: "0.3.0"
    build: int | None  # the build it runs, when the tables leave exactly one
    known: str  # what the tables say about the version, for the message

    def fix(self, image: str) -> str:
        """What to write instead: the same image under its nightly's tag."""
        tagged = re.sub(re.escape(self.release) + r"$", "b<BUILD>", image)
        return (
            f"write the nightly build's tag, {tagged}: the same image, whose `llama-server --version` prints "
            f"the build ({self.version}-dev (build BUILD, ...))"
        )


def semver_build(release: str, shipped: tuple[ReleaseFacts, ...] | None = None) -> SemverBuild:
    """The build a release tag runs, from the versions the shipped tables record."""
    match = _SEMVER.match(release)
    if match is None:
        raise ValueError(f"{release!r} is not a semantic version")
    version = ".".join(str(int(part)) for part in match.groups())
    asked = _key(version)
    # a build from before llama.cpp had a version (no LLAMA_VERSION_* in CMakeLists.txt) is older than any
    found = sorted((_build(facts), facts.version) for facts in (tables("llamacpp") if shipped is None else shipped))
    carrying = [build for build, v in found if v == version]
    older = [(build, v or "no version") for build, v in found if v is None or _key(v) < asked]
    newer = [(build, v) for build, v in found if v is not None and _key(v) > asked]
    low, high = (older[-1] if older else None), (newer[0] if newer else None)
    said = [f"{v} at b{b}" for b, v in ([low] if low else [])]
    if carrying:
        said.append(f"{version} at " + ", ".join(f"b{b}" for b in carrying))
    said += [f"{v} at b{b}" for b, v in ([high] if high else [])]
    known = "the release tables' CMakeLists.txt say " + "; ".join(said) if said else "no release table is shipped"
    exact = (
        len(carrying) == 1
        and low is not None
        and high is not None
        and low[0] == carrying[0] - 1
        and high[0] == carrying[0] + 1
    )
    return SemverBuild(release, version, carrying[0] if exact else None, known)


def tag_release(family: ImageFamily, image: str) -> str | None:
    """The semantic version an image's tag names (`v0.3.0`), for a family whose tags can."""
    if not family.release:
        return None
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name else ""
    found = re.search(family.release, tag)
    return found.group(1) if found else None


def image_build(image: str) -> int | None:
    """The llama.cpp build an image runs: the one its tag names (`-b11434`), or the one its release tag
    (`-v0.3.0`) is known to run; None when neither says."""
    family = family_of("llamacpp", image)
    if family is None:
        return None
    build = family.build_number(image)
    if build is not None:
        return build
    release = tag_release(family, image)
    return semver_build(release).build if release else None
