"""Files the release readers share: the download cache (under XDG_CACHE_HOME), the sha256 of an artifact, and
the release JSON written by rename, each saying which tool wrote it from which artifact.

Only `olarespack releases refresh` (and the maintainers' tools/engine_releases/) reach the network; lint and
the tests read the committed JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CACHE_NAME = "olarespack-engine-releases"
# what every release JSON names as its writer (with the command's arguments), so a table is traced to the code
TOOL = "olarespack releases refresh"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where downloaded artifacts are kept: $XDG_CACHE_HOME/olarespack-engine-releases, else ~/.cache/... (an
    XDG_CACHE_HOME that is not absolute is ignored, as the XDG spec says)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / CACHE_NAME


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def written_by(command: str) -> dict[str, str]:
    """The `written_by` entry of a release JSON: the command that writes it again."""
    return {"tool": TOOL, "command": command}


def write_json(path: Path, data: Mapping[str, Any], indent: int = 0) -> None:
    """Write by rename (sorted keys) so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, sort_keys=True, indent=indent, ensure_ascii=False) + "\n")
        os.chmod(partial, 0o644)  # mkstemp's 0600 would make committed files unreadable to others
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
