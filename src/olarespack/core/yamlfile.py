"""A spec file's bytes to plain data, bounded: spec files come from strangers' pull requests.

The file must be a regular file of at most MAX_FILE bytes in UTF-8 (a UTF-16 or Latin-1 file is named as
such). Its YAML is first walked as a stream of libyaml's parser events, which is iterative and cheap, so nesting
depth, node count and anchors are refused before anything is built: no recursion limit is reached, and
no alias can expand into an exponential tree for the models to walk. Only then is the document built with
YAML 1.2's safe constructor; anything that fails there (an impossible date, a duplicate key) is a problem
with its line, never a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from olarespack.core.errors import Problem, SpecError

MAX_FILE = 1 << 20
MAX_DEPTH = 32
MAX_EVENTS = 100_000


def _refuse(file: str, message: str, fix: str, where: str = "", rule: str = "yaml") -> SpecError:
    return SpecError([Problem(file, where, message, fix, rule=rule)])


def read_spec_bytes(path: Path) -> bytes:
    """The file's bytes; refuses what is not a regular file (a FIFO or a device would never end) and
    anything over MAX_FILE."""
    shown = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _refuse(shown, f"cannot read: {exc.strerror}", "check the path", rule="file") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(shown, "not a regular file", "give the path of a spec file", rule="file")
        data = handle.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise _refuse(
            shown, f"larger than {MAX_FILE // 1024} KiB; a spec is a few KiB", "split or shorten it", rule="file"
        )
    return data


def decode(file: str, data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(data) > 1 and b"\x00" in data[:4]):
        raise _refuse(file, "the file is UTF-16 or UTF-32", "save it as UTF-8", rule="encoding")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _refuse(
            file,
            f"not UTF-8 (byte 0x{data[exc.start]:02x} at line {line}; Latin-1 or Windows-1252?)",
            "save it as UTF-8",
            f"line {line}",
            rule="encoding",
        ) from None


def _where(exc: MarkedYAMLError | yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _check_events(file: str, text: str) -> None:
    """Depth, size and anchors from libyaml's event stream (C, iterative: fast and stack-safe)."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=yaml.CSafeLoader), 1):
        if count > MAX_EVENTS:
            raise _refuse(file, f"more than {MAX_EVENTS} YAML nodes", "a spec is a few hundred lines")
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = f"line {event.start_mark.line + 1}" if event.start_mark else ""
            raise _refuse(file, "YAML anchors and aliases are not supported in specs", "write the value out", line)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = f"line {event.start_mark.line + 1}" if event.start_mark else ""
                raise _refuse(file, f"nested deeper than {MAX_DEPTH} levels", "flatten the YAML", line)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_yaml(file: str, text: str) -> Any:
    """The document as plain data (dicts, lists, scalars); a SpecError for anything malformed."""
    try:
        _check_events(file, text)
        return YAML(typ="safe", pure=True).load(text)
    except SpecError:
        raise
    except (MarkedYAMLError, yaml.MarkedYAMLError) as exc:
        raise _refuse(
            file, f"invalid YAML: {exc.problem or exc.context or 'syntax error'}", "fix the YAML syntax", _where(exc)
        ) from None
    except yaml.YAMLError as exc:
        raise _refuse(file, f"invalid YAML: {str(exc).splitlines()[0][:200]}", "fix the YAML syntax") from None
    except YAMLError as exc:
        raise _refuse(file, f"invalid YAML: {str(exc).splitlines()[0][:200]}", "fix the YAML syntax") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # the constructor's own checks: a date like 2026-02-30, an unhashable key, an out-of-range number
        raise _refuse(file, f"invalid YAML value: {str(exc)[:200]}", "fix the value") from None


def load_spec_data(path: Path) -> Any:
    shown = str(path)
    return parse_yaml(shown, decode(shown, read_spec_bytes(path)))
