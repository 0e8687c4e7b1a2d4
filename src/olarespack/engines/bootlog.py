"""Boot logs, read the way every engine's is: bounded, line by line, each line handed to every engine's
reader (its EngineLog), which counts the lines that look like its boot and keeps the values it prints while
it sizes its memory.

A log is hostile input: at most MAX_LOG_BYTES are read, line by line, each line cut at MAX_LINE_BYTES; ANSI
colours and kubectl prefixes are ignored; every pattern an engine reads is a literal anchor with bounded
numbers (NUM).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TypeVar

MAX_LOG_BYTES = 64 * 2**20
MAX_LINE_BYTES = 16 * 2**10
NUM = r"(\d{1,7}(?:\.\d{1,6})?)"  # a bounded number, for the engines' patterns
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]")


@dataclass
class EngineLog:
    """What one engine reads from a boot log. Where a line repeats, the last one counts (one boot per log)."""

    kind: str
    marks: int = 0  # lines that look like this engine's boot
    model: str | None = None  # the model the boot served, when the log says it
    version: str | None = None  # the engine release, when the log says it
    # engine.calibration's field ("available_kv_cache_gib", a buffer map's "model_buffer_mib CUDA0") -> the
    # number of the line it was last read from: a value a calibration refuses is reported at its line
    lines: dict[str, int] = field(default_factory=dict)

    def feed(self, number: int, line: str) -> None:
        """Read one line (ANSI colours and carriage returns already gone)."""

    @property
    def calibrated(self) -> bool:
        """Whether the log holds the lines a calibration of this engine needs."""
        return False

    def missing_lines(self) -> tuple[str, str] | None:
        """Why a boot of this engine printed no calibration lines, when the engine knows (what is missing, the
        fix); None when it does not say."""
        return None


L = TypeVar("L", bound=EngineLog)


@dataclass
class BootLog:
    """One boot log as every engine read it."""

    path: str
    readings: dict[str, EngineLog]  # engine kind -> what it read
    truncated: bool = False

    @property
    def engine(self) -> str | None:
        """The kind of engine the log looks like (the most marks; the first engine on a tie), or None."""
        best = max(self.readings.values(), key=lambda r: r.marks, default=None)
        return best.kind if best is not None and best.marks else None

    def calibrated(self, kind: str) -> bool:
        return self.readings[kind].calibrated

    def of(self, kind: str, reading: type[L]) -> L:
        """What the engine of this kind read, as its own EngineLog class."""
        found = self.readings[kind]
        if not isinstance(found, reading):
            raise TypeError(f"{kind} read the log with {type(found).__name__}, not {reading.__name__}")
        return found


def _lines(handle: BinaryIO) -> Iterator[str]:
    """The lines of at most MAX_LOG_BYTES of the file; lines longer than MAX_LINE_BYTES are cut."""
    budget = MAX_LOG_BYTES
    while budget > 0:
        raw = handle.readline(min(MAX_LINE_BYTES, budget))
        if not raw:
            return
        budget -= len(raw)
        if not raw.endswith(b"\n"):  # cut: skip the rest of this line, within the budget
            while budget > 0:
                rest = handle.readline(min(MAX_LINE_BYTES, budget))
                budget -= len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
        yield _ANSI.sub("", raw.decode("utf-8", errors="replace")).replace("\r", "")


def read_log(path: Path, readers: Sequence[EngineLog]) -> BootLog:
    """Read a boot log with every engine's reader (bounded; see the module docstring). Raises OSError, or
    ValueError for something that is not a regular file (a FIFO or a device would block or never end)."""
    # opened without blocking and checked on the descriptor, so a FIFO swapped in after a check is never waited on
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path}: not a regular file")
        for number, line in enumerate(_lines(handle), 1):
            for reader in readers:
                reader.feed(number, line)
    return BootLog(str(path), {reader.kind: reader for reader in readers}, truncated=info.st_size > MAX_LOG_BYTES)
