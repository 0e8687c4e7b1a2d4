"""The one way a spec file is edited in place (calibrate, bench run --record, plan --write, bump, bump --image):
read under a lock, edited as text with "\\n" line ends, written back with the file's own line ends, then
unlocked. Two editors of one spec at once would otherwise both read the old text and the later write would
drop the earlier edit; and a CRLF or CR-only file would come back LF, every line showing in the review diff.

The lock is fcntl.flock on the spec file itself. A write replaces the file (a new inode, write_file's rename),
so a lock taken on the old inode is dropped and taken again on the file now at the path. A second editor
waits up to LOCK_WAIT seconds, then stops with a message saying who holds the file."""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from olarespack.core.errors import Problem, ProblemsError
from olarespack.core.yamlfile import decode, read_spec_bytes
from olarespack.write import Status, write_file

LOCK_WAIT = 30.0  # seconds; an in-place edit holds the lock for well under a second, a bump for a few
_POLL = 0.05
_held: dict[Path, int] = {}  # the spec files this process holds locked -> the locked descriptor


def _key(path: Path) -> Path:
    return path.resolve()


def _busy(path: Path, waited: float) -> ProblemsError:
    return ProblemsError(
        [
            Problem(
                str(path),
                "",
                f"another olarespack command has been editing this spec for "
                f"{waited:.0f} s (calibrate, bench run --record, plan --write or bump); nothing was "
                "written",
                "run this again once it has finished",
                rule="file",
            )
        ]
    )


def _lock(path: Path, wait: float) -> int:
    """A descriptor of the file now at `path`, flock'ed exclusively."""
    start = time.monotonic()
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            raise ProblemsError(
                [
                    Problem(
                        str(path),
                        "",
                        f"cannot open for an in-place edit: {why}",
                        "give the spec file itself, a regular file",
                        rule="file",
                    )
                ]
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() - start >= wait:
                raise _busy(path, time.monotonic() - start) from None
            time.sleep(_POLL)
            continue
        try:
            current = os.stat(path, follow_symlinks=False)
        except OSError:
            current = None
        if current is not None and current.st_ino == os.fstat(fd).st_ino and current.st_dev == os.fstat(fd).st_dev:
            return fd
        os.close(fd)  # replaced while we waited: lock the file that is there now


@contextmanager
def editing(*paths: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold every given spec locked for a read-modify-write (in one order, so two editors of the same specs
    cannot wait on each other); a spec this process holds already is not locked twice."""
    with ExitStack() as stack:
        for path in sorted({_key(p): p for p in paths}.values(), key=_key):
            key = _key(path)
            if key in _held:
                continue
            _held[key] = _lock(path, wait)
            stack.callback(_release, key)
        yield


def _release(key: Path) -> None:
    fd = _held.pop(key, None)
    if fd is not None:
        os.close(fd)  # closing the descriptor drops its flock


def newline_of(data: bytes) -> str:
    """The line end a file uses most: "\\r\\n", "\\r" (old Mac) or "\\n"."""
    crlf = data.count(b"\r\n")
    cr, lf = data.count(b"\r") - crlf, data.count(b"\n") - crlf
    return max((lf, "\n"), (crlf, "\r\n"), (cr, "\r"), key=lambda pair: pair[0])[1] if crlf or cr else "\n"


def read_spec_text(path: Path) -> str:
    """The spec's text with "\\n" line ends (bounded, a regular file), read under its edit lock."""
    _require_lock(path)
    text = decode(str(path), read_spec_bytes(path))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def write_spec_text(path: Path, text: str) -> Status:
    """The edited text written over the spec in one rename, with the line ends of the file it replaces."""
    _require_lock(path)
    before = read_spec_bytes(path)
    newline = newline_of(before)
    data = (text if newline == "\n" else text.replace("\n", newline)).encode("utf-8")
    bom = b"\xef\xbb\xbf"
    return write_file(path, bom + data if before.startswith(bom) and not data.startswith(bom) else data)


def _require_lock(path: Path) -> None:
    if _key(path) not in _held:
        raise RuntimeError(f"{path}: an in-place edit outside `editing()`")  # a bug of olarespack, not input
