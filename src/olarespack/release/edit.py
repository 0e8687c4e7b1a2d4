"""Raising an app's version: the spec edited in place (only its version line and a new changelog entry
change; comments, key order and quoting survive), then the chart re-rendered so Chart.yaml, the manifest's
version, versionName and upgradeDescription all agree."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from olarespack.core.errors import Problem, ProblemsError
from olarespack.release.version import Part, bump

_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9(][^\n#]*$")


@dataclass(frozen=True)
class SpecEdit:
    file: Path
    old_version: str
    new_version: str
    text: str  # the whole new spec text


def _yaml_text(note: str) -> str:
    """The note as one YAML scalar: plain when YAML reads it back unchanged, double-quoted otherwise."""
    if _PLAIN_SAFE.match(note) and ": " not in note and not note.endswith(":"):
        loaded = YAML(typ="safe", pure=True).load(f"k: {note}")
        if loaded == {"k": note}:
            return note
    return json.dumps(note, ensure_ascii=False)


def edit_spec(file: Path, text: str, part: Part, note: str, today: dt.date) -> SpecEdit:
    """The spec's text with its version raised and a changelog entry on top; nothing else moves."""
    data: Any = YAML(typ="rt").load(text)  # a CommentedMap: it knows the line of every key

    def refuse(path: str, message: str, fix: str) -> ProblemsError:
        return ProblemsError([Problem(str(file), path, message, fix, rule="bump")])

    if not hasattr(data, "lc") or "version" not in data or not data.get("changelog"):
        raise refuse("", "no version or changelog to bump", "start from one of apps/*.yaml")
    old_version = str(data["version"])
    new_version = bump(old_version, part)
    lines = text.splitlines(keepends=True)

    version_line = data.lc.key("version")[0]
    match = re.match(r"^(version:\s*)(['\"]?)([^'\"\s#]+)(['\"]?)(.*)$", lines[version_line].rstrip("\n"))
    if not match or match[3] != old_version:
        raise refuse("version", "the version line is not a plain `version: X.Y.Z` line", "write it on one line")
    lines[version_line] = f"{match[1]}{match[2]}{new_version}{match[4]}{match[5]}\n"

    first_line, first_column = data["changelog"].lc.item(0)
    indent = " " * (first_column - 2)
    entry = [f"{indent}- version: {new_version}\n", f"{indent}  date: {today.isoformat()}\n",
             f"{indent}  note: {_yaml_text(note)}\n"]
    lines[first_line:first_line] = entry
    new_text = "".join(lines)

    # the edit must change exactly the version and prepend the entry: check it on the data, not the text
    before, after = YAML(typ="safe", pure=True).load(text), YAML(typ="safe", pure=True).load(new_text)
    expected: dict[str, Any] = {**before, "version": new_version,
                                "changelog": [{"version": new_version, "date": today, "note": note},
                                              *before["changelog"]]}
    if after != expected:
        raise refuse("changelog", "the changelog layout defeats an in-place edit", "edit the spec by hand")
    return SpecEdit(file, old_version, new_version, new_text)
