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
FIGURE = re.compile(NUM)  # a whole figure as the engines print it (fullmatch): no sign, no exponent
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]")
_BREAK = re.compile(rb"\r\n|\r|\n")
_CHUNK = 1 << 16


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
    # (line number, what it sizes) of a line that says a size the engine prints but whose figure does not read
    # as one (a negative number, 1e3): refused, never dropped, so no partial sum is recorded
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    # (line number, why) of what one boot never prints (a buffer line repeated past what one boot writes): a log
    # pasted together or forged, refused rather than summed
    impossible: list[tuple[int, str]] = field(default_factory=list)

    def device_problems(self, gpu: str | None, hardware: str, spec_file: str) -> list[tuple[str, str]]:
        """(message, fix) for a boot that ran on another device than the spec's hardware (`gpu`: its GPU's name
        as the profile titles it), or measured nothing of the GPU; an engine whose log says its device checks."""
        return []

    # what the log must say itself for a calibration to record it as measured there -> where the engine says it
    provenance: dict[str, str] = field(default_factory=dict)

    def feed(self, number: int, line: str) -> None:
        """Read one line (ANSI colours and line breaks already gone)."""

    def unsaid(self) -> list[str]:
        """What of `provenance` the log does not say (its model, its release, ...)."""
        return [what for what in self.provenance if getattr(self, what, None) is None]

    def gpu_mib(self) -> tuple[float, str] | None:
        """The memory the boot's buffers take on the GPU, in MiB, with the `lines` key of the largest one."""
        return None

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


def _text(raw: bytes) -> str:
    return _ANSI.sub("", raw.decode("utf-8", errors="replace"))


def _lines(handle: BinaryIO) -> Iterator[str]:
    """The lines of at most MAX_LOG_BYTES of the file, broken at LF, CRLF or a lone CR (a log saved on an old
    Mac, or progress bars redrawn with CR); lines longer than MAX_LINE_BYTES are cut."""
    budget, pending, cut = MAX_LOG_BYTES, b"", False
    while True:
        chunk = handle.read(min(_CHUNK, budget)) if budget > 0 else b""
        budget -= len(chunk)
        data, held = pending + chunk, b""
        if chunk and data.endswith(b"\r"):  # a CR at the end of a chunk may be the first half of a CRLF
            data, held = data[:-1], b"\r"
        parts = _BREAK.split(data)
        pending = parts.pop() + held if chunk else b""
        for raw in parts:
            if not cut:
                yield _text(raw[:MAX_LINE_BYTES])
            cut = False
        if not chunk:
            return
        if len(pending) > MAX_LINE_BYTES:  # the rest of this line, up to its break, is skipped
            if not cut:
                yield _text(pending[:MAX_LINE_BYTES])
            pending, cut = held, True


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
