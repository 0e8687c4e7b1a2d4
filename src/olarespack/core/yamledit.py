"""Pieces of in-place edits of YAML text (calibrate, bench run --record, bump): lines are spliced into the file so its
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
    from ruamel.yaml.error import YAMLError

    text = str(value)
    try:
        loaded = YAML(typ="safe", pure=True).load(f"k: {text}")
    except YAMLError:  # text such as `a: b` that would not even load plain
        loaded = None
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


Step = str | int  # a mapping key or a list index, from the top of the document


def _node(root: Any, path: tuple[Step, ...]) -> Any:
    node = root
    for step in path:
        node = node[step]
    return node


def node_stop(root: Any, path: tuple[Step, ...], end_of_file: int) -> int:
    """The line where the node at `path` of a round-trip document ends: its next sibling's line, else where its
    parent ends (the end of the file at the top)."""
    if not path:
        return end_of_file
    parent, step = _node(root, path[:-1]), path[-1]
    if isinstance(step, int):
        if step + 1 < len(parent):
            return int(parent.lc.item(step + 1)[0])
    else:
        keys = list(parent)
        position = keys.index(step)
        if position + 1 < len(keys):
            return int(parent.lc.key(keys[position + 1])[0])
    return node_stop(root, path[:-1], end_of_file)


def key_block(root: Any, path: tuple[Step, ...], lines: list[str]) -> tuple[int, int]:
    """The lines [start, end) of the key at `path` (a block-style mapping's key): its own line and its value's;
    the comments and blank lines after it stay with what follows."""
    start = int(_node(root, path[:-1]).lc.key(path[-1])[0])
    return start, last_content_line(lines, start, node_stop(root, path, len(lines)))


def splice_block(root: Any, path: tuple[Step, ...], block: list[str], lines: list[str]) -> None:
    """`lines` with the key at `path` replaced by `block` (whole lines, the key's own included), or, when the
    mapping has no such key, `block` added after its last key. The caller checks the result on the data."""
    mapping = _node(root, path[:-1])
    if path[-1] in mapping:
        start, end = key_block(root, path, lines)
        lines[start:end] = block
        return
    first_line = int(mapping.lc.key(next(iter(mapping)))[0])
    at = last_content_line(lines, first_line, node_stop(root, path[:-1], len(lines)))
    lines[at:at] = block


def set_scalar(text: str, path: tuple[str, ...], value: Any) -> str:
    """The text with the scalar at `path` (mapping keys from the top) set to `value` on its own line, its indent
    and trailing comment kept; checked on the data: everything else must load back equal. ValueError saying why
    when the key is not there as a one-line `key: value` (a layout an in-place edit would get wrong)."""
    import re

    from ruamel.yaml.error import YAMLError

    try:
        data: Any = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ValueError(f"the spec is not YAML ({str(exc).splitlines()[0][:120]})") from None
    node: Any = data
    for depth, key in enumerate(path):
        if not hasattr(node, "lc") or not hasattr(node, "get") or key not in node:
            raise ValueError(f"{'.'.join(path[: depth + 1])} is not in the spec")
        if depth < len(path) - 1:
            node = node[key]
    key = path[-1]
    if isinstance(node[key], dict | list):
        raise ValueError(f"{'.'.join(path)} is a {'mapping' if isinstance(node[key], dict) else 'list'}, not one value")
    try:
        line, _column = node.lc.key(key)
    except KeyError:  # a key that comes from a merge (`<<:`), not written in this mapping
        raise ValueError(f"{'.'.join(path)} is not written as a one-line `{key}: value`") from None
    lines = text.splitlines(keepends=True)
    ending = lines[line][len(lines[line].rstrip("\r\n")) :]
    match = re.match(
        rf"^(\s*(?:-\s+)?{re.escape(key)}:[ \t]*)(\"[^\"]*\"|'[^']*'|[^#\s][^#]*?)?([ \t]+#.*)?$",
        lines[line].rstrip("\r\n"),
    )
    if match is None or match[2] is None:
        raise ValueError(f"{'.'.join(path)} is not written as a one-line `{key}: value`")
    lines[line] = f"{match[1]}{scalar(value)}{match[3] or ''}{ending}"
    new_text = "".join(lines)
    safe = YAML(typ="safe", pure=True)
    expected = safe.load(text)
    target = expected
    for step in path[:-1]:
        target = target[step]
    target[key] = value
    try:
        after = safe.load(new_text)
    except YAMLError:
        after = None
    if after != expected:
        raise ValueError(f"{'.'.join(path)}: the spec's layout defeats an in-place edit")
    return new_text
