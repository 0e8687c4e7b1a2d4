"""Facts of Olares itself that every stage shares: the two manifest generations and which Olares
releases install which, the names Olares reserves, app ids, and chart archive names."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final, Literal

import semver

from olarespack.core.errors import UsageError

GenerationName = Literal["current", "legacy"]


@dataclass(frozen=True)
class Generation:
    """What differs between the two Olares manifest generations."""

    name: GenerationName
    manifest_version: str
    api_version: str
    olares_dependency: str
    hf_endpoint_env: str  # envName in the manifest = key under .Values.olaresEnv
    hf_endpoint_source: str  # the Olares system/user env it is filled from
    hf_token_env: str
    hf_token_source: str


GENERATIONS: Final[dict[GenerationName, Generation]] = {
    "current": Generation(
        "current",
        "0.12.0",
        "v3",
        ">=1.12.6-0",
        "HF_ENDPOINT",
        "OLARES_SYSTEM_HUGGINGFACE_SERVICE",
        "HF_TOKEN",
        "OLARES_SYSTEM_HUGGINGFACE_TOKEN",
    ),
    # apiVersion v1, the single-chart format: Olares' linter refuses v2 without spec.subCharts
    # (checkSubCharts), and a v1 app is kept off 1.12.6, which would refuse it (validateOlaresDependency).
    "legacy": Generation(
        "legacy",
        "0.10.0",
        "v1",
        ">=1.12.3-0,<1.12.6",
        "OLARES_USER_HUGGINGFACE_SERVICE",
        "OLARES_USER_HUGGINGFACE_SERVICE",
        "OLARES_USER_HUGGINGFACE_TOKEN",
        "OLARES_USER_HUGGINGFACE_TOKEN",
    ),
}
GENERATION_NAMES: Final[tuple[GenerationName, ...]] = tuple(GENERATIONS)

RESERVED_APP_NAMES: Final = frozenset(
    {
        "user",
        "system",
        "space",
        "default",
        "os",
        "kubesphere",
        "kube",
        "kubekey",
        "kubernetes",
        "gpu",
        "tapr",
        "bfl",
        "bytetrade",
        "project",
        "pod",
    }
)
APP_NAME: Final = re.compile(r"^[a-z0-9]{1,30}$")
_ARCHIVE: Final = re.compile(r"^([a-z0-9]{1,30})-(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]*)?)\.tgz$")


def generation_for_olares(version: str) -> GenerationName:
    """The manifest generation an Olares release installs: 1.12.3-1.12.5 legacy, 1.12.6 and later current."""
    try:
        parsed = semver.Version.parse(version, optional_minor_and_patch=True)
    except ValueError:
        raise UsageError(f"--olares-version: {version!r} is not a version like 1.12.5") from None
    if parsed < semver.Version(1, 12, 3):
        raise UsageError(f"--olares-version: Olares {version} predates both manifest generations (>= 1.12.3)")
    return "legacy" if parsed < semver.Version(1, 12, 6) else "current"


def app_id(name: str) -> str:
    """Olares' app id: the first 8 hex digits of md5(name)."""
    return hashlib.md5(name.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]


def archive_name(name: str, version: str) -> str:
    """The file name of a packaged chart, as Helm writes it and as boxes ask for it."""
    return f"{name}-{version}.tgz"


def parse_archive_name(file_name: str) -> tuple[str, str] | None:
    """(app name, version) of an archive file name, or None when it is not one."""
    match = _ARCHIVE.match(file_name)
    return (match.group(1), match.group(2)) if match else None


def oldest_market_olares(releases: list[str]) -> str | None:
    """The oldest of `releases` (oldest first) that some generation's olares dependency admits: the oldest
    Olares a market of both generations installs an app on."""
    from olarespack.olares.versions import satisfies

    ranges = [generation.olares_dependency for generation in GENERATIONS.values()]
    return next((release for release in releases if any(satisfies(release, r) for r in ranges)), None)
