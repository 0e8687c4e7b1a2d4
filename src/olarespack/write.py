"""RenderedChart -> disk. Compares with what is there, then swaps whole chart folders in through a
temporary sibling, so a chart folder is always either the old one or the new one, never half of each."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Literal

from olarespack.render import RenderedChart

Status = Literal["created", "updated", "unchanged"]
_FILE_MODE = 0o644


def read_folder(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def changed_files(chart: RenderedChart, folder: Path) -> list[str]:
    """Chart-relative paths whose content differs, including files on disk the render would not produce."""
    on_disk = read_folder(folder)
    wanted = {path: text.encode("utf-8") for path, text in chart.items()}
    return sorted(p for p in set(on_disk) | set(wanted) if on_disk.get(p) != wanted.get(p))


def write_chart(chart: RenderedChart, folder: Path) -> Status:
    existed = folder.exists()
    if existed and not changed_files(chart, folder):
        return "unchanged"
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.olarespack-new"
    retired = folder.parent / f".{folder.name}.olarespack-old"
    for leftover in (staging, retired):
        if leftover.exists():
            shutil.rmtree(leftover)
    try:
        for path, text in chart.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
            os.chmod(target, _FILE_MODE)
        if existed:
            folder.rename(retired)
        staging.rename(folder)
    except BaseException:
        if retired.exists() and not folder.exists():
            retired.rename(folder)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(retired, ignore_errors=True)
    return "updated" if existed else "created"
