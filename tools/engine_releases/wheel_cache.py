"""The wheel-source cache for the maintainers' tools (vllm_argv_check.py, vllm_kv_check.py): the package's
olarespack.engines.vllm.tables.wheels, with the cache under XDG_CACHE_HOME."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from olarespack.engines.release_files import cache_dir
from olarespack.engines.vllm.tables.wheels import Artifact, FetchError, fetch, newest_per_minor, slim_wheel

DEFAULT_CACHE = cache_dir()

__all__ = ["DEFAULT_CACHE", "Artifact", "FetchError", "fetch", "newest_per_minor", "slim_wheel"]
