"""A bench record written into the spec text: `bench:` in the changelog entry of the spec's version, replacing
the one it had. Only those lines change (comments, key order and quoting elsewhere survive, as in bump and
calibrate); the edit is checked on the data, everything else must load back equal."""

from __future__ import annotations

import json
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from olarespack.core.errors import Problem, ProblemsError
from olarespack.core.yamledit import scalar, splice_block

BY_HAND = "write the entry in block style (- version: ..., then date:, note: lines) or add bench: by hand"


def _scalar(value: Any) -> str:
    """yamledit.scalar, with text it cannot tell plain from (`my: prompt.txt`, whose trial load raises) quoted."""
    try:
        return scalar(value)
    except YAMLError:
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=False)
        raise


def _refuse(file: str, path: str, message: str, fix: str = BY_HAND) -> ProblemsError:
    return ProblemsError([Problem(file, path, message, fix, rule="bump")])


def _flow(item: dict[str, Any]) -> str:
    """A mapping on one line; text always quoted (a comma or brace would end a plain scalar in flow style)."""
    shown = (json.dumps(v, ensure_ascii=False) if isinstance(v, str) else _scalar(v) for v in item.values())
    return "{" + ", ".join(f"{key}: {value}" for key, value in zip(item, shown, strict=True)) + "}"


def _lines(pad: str, key: str, value: Any) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return [f"{pad}{key}:\n", *(f"{pad}  - {_flow(item)}\n" for item in value)]
    return [f"{pad}{key}: {_scalar(value)}\n"]


def record_bench(file: str, text: str, values: dict[str, Any], key: str = "bench") -> tuple[str, bool]:
    """The spec text with the newest changelog entry's `key` (bench, or a sweep) set to `values` (None-valued
    keys left out), and whether it replaced one."""
    data: Any = YAML(typ="rt").load(text)
    changelog = data.get("changelog") if hasattr(data, "lc") else None
    if not hasattr(changelog, "lc") or not changelog or not hasattr(changelog[0], "lc"):
        raise _refuse(file, "changelog", "no changelog entry to record the bench in", "start from one of apps/*.yaml")
    if str(changelog[0].get("version")) != str(data.get("version")):
        raise _refuse(
            file,
            "changelog[0].version",
            f"the newest changelog entry is {changelog[0].get('version')}, "
            f"not the spec's version {data.get('version')}",
            "add the entry first (olarespack bump)",
        )
    entry = changelog[0]
    first_line, column = entry.lc.key(next(iter(entry)))
    if changelog.lc.item(0)[0] != first_line:
        raise _refuse(file, "changelog[0]", "the entry's layout defeats an in-place edit")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    pad = " " * column
    kept = {k: v for k, v in values.items() if v is not None}
    block = [f"{pad}{key}:\n", *(line for name, value in kept.items() for line in _lines(pad + "  ", name, value))]
    replaced = key in entry
    splice_block(data, ("changelog", 0, key), block, lines)
    new_text = "".join(lines)
    safe = YAML(typ="safe", pure=True)
    before = safe.load(text)
    try:
        after_edit = safe.load(new_text)
    except YAMLError:
        after_edit = None
    expected = {**before, "changelog": [{**before["changelog"][0], key: kept}, *before["changelog"][1:]]}
    if after_edit != expected:
        raise _refuse(file, f"changelog[0].{key}", "the spec's layout defeats an in-place edit")
    return new_text, replaced
