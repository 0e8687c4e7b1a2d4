"""Files to disk, never half-written. Folders (a chart, a whole market) are built beside their target and
swapped in whole; single files (specs, archives, catalogs) are replaced in one rename.

A folder swap is one atomic exchange of the two names where the kernel offers it (Linux renameat2 with
RENAME_EXCHANGE), so a kill at any moment leaves either the old folder or the new one in place, plus at
most a hidden leftover that the next write removes. Elsewhere it is two renames, and the next write first
puts a retired folder back if a kill fell between them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from olarespack.core.errors import WriteError

Status = Literal["created", "updated", "unchanged"]
FILE_MODE = 0o644
STAGING_SUFFIX = ".olarespack-new"
RETIRED_SUFFIX = ".olarespack-old"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def is_leftover(path: Path) -> bool:
    """A hidden staging or retired folder of an interrupted write: never an input to anything."""
    return path.name.startswith(".") and path.name.endswith((STAGING_SUFFIX, RETIRED_SUFFIX))


def read_folder(folder: Path) -> dict[str, bytes]:
    """Every regular file under folder. A symbolic link is read as its own target path, never followed:
    a link in a stranger's chart must not pull another file of the machine into a diff or a lint."""
    if not folder.is_dir() or folder.is_symlink():
        return {}
    found: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[key] = f"symlink -> {os.readlink(path)}".encode()
        elif path.is_file():
            found[key] = path.read_bytes()
    return found


def changed_files(chart: Mapping[str, str], folder: Path) -> list[str]:
    """Chart-relative paths whose content differs, including files on disk the render would not produce."""
    on_disk = read_folder(folder)
    wanted = {path: text.encode("utf-8") for path, text in chart.items()}
    return sorted(p for p in set(on_disk) | set(wanted) if on_disk.get(p) != wanted.get(p))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically; False where the system cannot (not Linux, or a filesystem without it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def recover(target: Path) -> None:
    """Undo what an interrupted swap left: a retired folder goes back if the target is missing, then every
    leftover of the target goes."""
    staging = target.parent / f".{target.name}{STAGING_SUFFIX}"
    retired = target.parent / f".{target.name}{RETIRED_SUFFIX}"
    if not target.exists() and not target.is_symlink() and retired.is_dir():
        retired.rename(target)
    for leftover in (staging, retired):
        if leftover.exists() or leftover.is_symlink():
            _remove(leftover)


def check_target(target: Path) -> None:
    """A target folder that is a file or a link is someone else's: refuse instead of replacing it."""
    if target.is_symlink():
        raise WriteError(f"{target}: is a symbolic link; olarespack writes real folders only (remove the link)")
    if target.exists() and not target.is_dir():
        raise WriteError(f"{target}: exists and is not a folder (remove it or choose another output folder)")
    for parent in target.parents:
        if parent.exists() and not parent.is_dir():
            raise WriteError(f"{parent}: is not a folder, so {target} cannot be written")


def staging_folder(target: Path) -> Path:
    """An empty hidden sibling to build the target's next content in."""
    check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    staging = target.parent / f".{target.name}{STAGING_SUFFIX}"
    staging.mkdir()
    return staging


def swap_in(staging: Path, target: Path) -> None:
    """Put the staged folder at target, in one step where the system allows, and remove the old content."""
    if not target.exists():
        staging.rename(target)
    elif _exchange(staging, target):
        shutil.rmtree(staging)  # it now holds the old content
    else:
        retired = target.parent / f".{target.name}{RETIRED_SUFFIX}"
        target.rename(retired)
        staging.rename(target)
        shutil.rmtree(retired)


def write_chart(chart: Mapping[str, str], folder: Path) -> Status:
    check_target(folder)
    recover(folder)
    existed = folder.exists()
    if existed and not changed_files(chart, folder):
        return "unchanged"
    staging = staging_folder(folder)
    try:
        write_files(chart, staging)
        swap_in(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return "updated" if existed else "created"


def write_files(chart: Mapping[str, str], folder: Path) -> None:
    """The chart's files under folder, with fixed modes (nothing of the umask leaks into the output)."""
    for path, text in sorted(chart.items()):
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
        os.chmod(target, FILE_MODE)


def write_file(path: Path, data: bytes) -> Status:
    """Replace path with data in one rename, unless it already holds exactly that; an existing file
    keeps its mode."""
    if path.is_symlink() or (path.exists() and not stat.S_ISREG(path.stat().st_mode)):
        raise WriteError(f"{path}: exists and is not a regular file (remove it)")
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
