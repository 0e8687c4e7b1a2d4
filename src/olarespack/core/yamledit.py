"""Pieces of in-place edits of YAML text (calibrate, bench --record): lines are spliced into the file so its
comments, key order and quoting survive, and each edit is checked on the data afterwards."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ruamel.yaml import YAML


def scalar(value: Any) -> str:
    """A YAML scalar that reads back as the value: numbers as they are, text plain when safe, else quoted."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(scalar(item) for item in value) + "]"
    text = str(value)
    loaded = YAML(typ="safe", pure=True).load(f"k: {text}")
    return text if loaded == {"k": text} else json.dumps(text, ensure_ascii=False)


def last_content_line(lines: list[str], start: int, stop: int) -> int:
    """The index after the last line in [start, stop) that is neither blank nor a comment: where a block ends,
    the comments and blank lines before the next key staying with that key."""
    end = start
    for index in range(start, stop):
        stripped = lines[index].strip()
        if stripped and not stripped.startswith("#"):
            end = index + 1
    return end
