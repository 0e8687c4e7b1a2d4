"""Files to disk, never half-written. Chart folders are compared with what is there, then swapped in whole
through a temporary sibling; single files (specs, archives, catalogs) are replaced in one rename."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from olarespack.render import RenderedChart

Status = Literal["created", "updated", "unchanged"]
FILE_MODE = 0o644


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
        write_files(chart, staging)
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


def write_files(chart: RenderedChart, folder: Path) -> None:
    """The chart's files under folder, with fixed modes (nothing of the umask leaks into the output)."""
    for path, text in sorted(chart.items()):
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
        os.chmod(target, FILE_MODE)


def write_file(path: Path, data: bytes) -> Status:
    """Replace path with data in one rename, unless it already holds exactly that; an existing file
    keeps its mode."""
    existed = path.is_file()
    if existed and path.read_bytes() == data:
        return "unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if existed else FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return "updated" if existed else "created"
