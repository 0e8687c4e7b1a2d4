"""A model's local files (config.json, a safetensors index) read bounded: regular files only, read once, at
most MAX_CONFIG_FILE bytes, errors naming the file and the fix."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from olarespack.core import boundedjson
from olarespack.core.errors import ModelDataError

MAX_CONFIG_FILE = 8 << 20  # a config.json is a few KiB; a safetensors index a few hundred
MAX_CONFIG_DEPTH = 64  # a config.json nests 4 or 5 deep (text_config.rope_scaling, quantization_config groups)
MAX_CONFIG_DIGITS = 64  # tokenizer configs write model_max_length as a 31-digit integer


def read_local_file(path: Path, what: str = "a config.json", limit: int = MAX_CONFIG_FILE) -> bytes:
    """A local file's bytes, read once: regular files only (opened without blocking, so a named pipe or a
    device is refused instead of waited on) and at most `limit` bytes; errors name the file and the fix."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ModelDataError(f"{path}: cannot read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ModelDataError(
                f"{path}: not a regular file (a pipe, a device or a socket); give the path of {what} saved on disk"
            )
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            raise ModelDataError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > limit:
        raise ModelDataError(f"{path}: larger than {limit >> 20} MiB; is it {what}?")
    return raw


def read_json_file(path: Path, what: str = "a config.json") -> dict[str, Any]:
    """A local JSON object, bounded (MAX_CONFIG_FILE, regular files only); errors name the file."""
    return parse_json(path, read_local_file(path, what), what)


def parse_json(path: Path, raw: bytes, what: str = "a config.json") -> dict[str, Any]:
    try:
        data = boundedjson.loads(raw.decode("utf-8-sig"), max_depth=MAX_CONFIG_DEPTH, max_digits=MAX_CONFIG_DIGITS)
    except (UnicodeDecodeError, ValueError) as exc:  # not JSON, too deep, a number too long (5,000 digits)
        raise ModelDataError(f"{path}: invalid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ModelDataError(f"{path}: {what} must be a JSON object")
    return data
