"""Raising an app's version: the spec edited in place (only its version line and a new changelog entry
change; comments, key order and quoting survive), then the chart re-rendered so Chart.yaml, the manifest's
version, versionName and upgradeDescription all agree. Moving an app to another engine image edits its
image line the same way, and comments out a calibration measured on another image."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from olarespack.core.errors import Problem, ProblemsError
from olarespack.core.types import Image
from olarespack.core.yamledit import key_block
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


def edit_spec(file: Path, text: str, part: Part, note: str, today: dt.date, carry_sweep: bool = False) -> SpecEdit:
    """The spec's text with its version raised and a changelog entry on top; nothing else moves, except, with
    carry_sweep, the sweep recorded in the entry below (a sweep not yet released: the setting it chose ships in
    the new version, so its record goes with it)."""
    data: Any = YAML(typ="rt").load(text)  # a CommentedMap: it knows the line of every key

    def refuse(path: str, message: str, fix: str) -> ProblemsError:
        return ProblemsError([Problem(str(file), path, message, fix, rule="bump")])

    if not hasattr(data, "lc") or "version" not in data or not data.get("changelog"):
        raise refuse("", "no version or changelog to bump", "start from one of apps/*.yaml")
    old_version = str(data["version"])
    new_version = bump(old_version, part)
    lines = text.splitlines(keepends=True)

    if not _replace_value(lines, data.lc.key("version")[0], "version", old_version, new_version):
        raise refuse("version", "the version line is not a plain `version: X.Y.Z` line", "write it on one line")

    changelog = data["changelog"]
    before: Any = YAML(typ="safe", pure=True).load(text)
    sweep = before["changelog"][0].get("sweep") if carry_sweep else None
    if sweep is not None:
        del lines[slice(*key_block(data, ("changelog", 0, "sweep"), lines))]
    first_line, first_column = changelog.lc.item(0)
    indent = " " * (first_column - 2)
    entry = [
        f"{indent}- version: {new_version}\n",
        f"{indent}  date: {today.isoformat()}\n",
        f"{indent}  note: {_yaml_text(note)}\n",
    ]
    lines[first_line:first_line] = entry
    new_text = "".join(lines)
    new_entry: dict[str, Any] = {"version": new_version, "date": today, "note": note}
    older = [dict(before["changelog"][0]), *before["changelog"][1:]]
    if sweep is not None:
        from olarespack.spec.bench_edit import record_bench

        new_text, _ = record_bench(str(file), new_text, sweep, key="sweep")
        new_entry["sweep"] = sweep
        del older[0]["sweep"]

    # the edit must change exactly the version and prepend the entry: check it on the data, not the text
    after = YAML(typ="safe", pure=True).load(new_text)
    expected: dict[str, Any] = {**before, "version": new_version, "changelog": [new_entry, *older]}
    if after != expected:
        raise refuse("changelog", "the changelog layout defeats an in-place edit", "edit the spec by hand")
    return SpecEdit(file, old_version, new_version, new_text)


@dataclass(frozen=True)
class ImageEdit:
    text: str  # the whole new spec text
    old_image: str
    new_image: str
    stale_calibration: str | None  # the image a calibration commented out was measured on
    stale_version: str | None  # the engine release engine.version gave for the old image, commented out


def full_image(current: str, given: str) -> str:
    """--image as written: a whole reference, or a tag alone for the image's own repository (v0.33.0)."""
    if "/" in given or ":" in given or "@" in given:
        return given
    return f"{current.split('@', 1)[0].rsplit(':', 1)[0] if ':' in current.rsplit('/', 1)[-1] else current}:{given}"


def move_image(file: Path, text: str, given: str) -> ImageEdit:
    """The spec's text with engine.image replaced; a calibration measured on another image is commented out
    (its lines kept under a note saying why), since its memory figures hold only for the image of its boot
    and the build refuses a stale one. engine.version, the release inside the old image where its tag says
    none, is commented out too: it would keep the old release's facts on the new image. Nothing else moves."""
    data: Any = YAML(typ="rt").load(text)

    def refuse(path: str, message: str, fix: str) -> ProblemsError:
        return ProblemsError([Problem(str(file), path, message, fix, rule="bump")])

    engine: Any = data.get("engine") if hasattr(data, "get") else None
    if not hasattr(engine, "lc") or not isinstance(engine.get("image"), str):
        raise refuse("engine.image", "no engine image to move", "start from one of apps/*.yaml")
    old_image = engine["image"]
    new_image = full_image(old_image, given)
    try:
        TypeAdapter(Image).validate_python(new_image)
    except ValidationError:
        raise refuse(
            "engine.image",
            f"--image {given!r} is not an image reference",
            "give registry/name:tag, or a tag alone for the current image's repository",
        ) from None
    lines = text.splitlines(keepends=True)
    if not _replace_value(lines, engine.lc.key("image")[0], "image", old_image, new_image):
        raise refuse("engine.image", "the image line is not a plain `image: REF` line", "write it on one line")
    calibration = engine.get("calibration")
    measured = calibration.get("image") if hasattr(calibration, "get") else None
    stale = measured if measured is not None and measured != new_image else None
    old_version = engine.get("version")
    stale_version = str(old_version) if old_version is not None else None
    why = {
        "calibration": f"stale: measured on {stale}; re-measure with `olarespack calibrate`",
        "version": f"stale: the release inside {old_image}",
    }
    stale_keys = [key for key, found in (("calibration", stale), ("version", stale_version)) if found is not None]
    # bottom up: commenting a key out adds a line, which would move the keys below it, never those above
    for key in sorted(stale_keys, key=lambda k: engine.lc.key(k)[0], reverse=True):
        lines = _comment_out(lines, engine, key, why[key])
    new_text = "".join(lines)
    before = YAML(typ="safe", pure=True).load(text)
    try:
        after = YAML(typ="safe", pure=True).load(new_text)
    except YAMLError:
        after = None
    expected_engine = {
        k: v
        for k, v in before["engine"].items()
        if not (stale and k == "calibration") and not (stale_version and k == "version")
    }
    if after != {**before, "engine": {**expected_engine, "image": new_image}}:
        raise refuse("engine.image", "the spec's layout defeats an in-place edit", "edit the image by hand")
    return ImageEdit(new_text, old_image, new_image, stale, stale_version)


def _replace_value(lines: list[str], line: int, key: str, old: str, new: str) -> bool:
    """`key: old` on that line, with its indent, quotes and trailing comment, made `key: new` in place; False
    when the line is not that plain one-line form (a layout an in-place edit would get wrong)."""
    match = re.match(rf"^(\s*{key}:\s*)(['\"]?)([^'\"\s#]+)(['\"]?)(.*)$", lines[line].rstrip("\n"))
    if not match or match[3] != old:
        return False
    lines[line] = f"{match[1]}{match[2]}{new}{match[4]}{match[5]}\n"
    return True


def _comment_out(lines: list[str], mapping: Any, key: str, why: str) -> list[str]:
    """The key's lines (itself and every more indented line after it) turned into comments under `why`."""
    first, column = mapping.lc.key(key)

    def inside(line: str) -> bool:
        return not line.strip() or line.lstrip().startswith("#") or len(line) - len(line.lstrip(" ")) > column

    end = first + 1
    while end < len(lines) and inside(lines[end]):
        end += 1
    while end > first + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1  # blank lines and comments before the next key stay with it
    while end > first + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines before the next key stay outside
    pad = " " * column
    commented = [f"{pad}# {line[column:]}" if line.strip() else line for line in lines[first:end]]
    return [*lines[:first], f"{pad}# {key} {why}\n", *commented, *lines[end:]]


def set_gpu_memory(file: Path, text: str, mib: int, why: str) -> str:
    """The spec's text with resources.gpu_memory booking `mib` MiB (request = limit) on one line, with `why` as
    its comment; an existing gpu_memory (one line or a block) is replaced, a missing one is added as the last
    key of resources. Nothing else moves."""
    data: Any = YAML(typ="rt").load(text)

    def refuse(message: str, fix: str) -> ProblemsError:
        return ProblemsError([Problem(str(file), "resources.gpu_memory", message, fix, rule="plan")])

    resources: Any = data.get("resources") if hasattr(data, "get") else None
    if not hasattr(resources, "lc") or not resources:
        raise refuse("no resources mapping to book GPU memory in", "start from one of apps/*.yaml")
    booking = f"{mib}Mi"
    lines = text.splitlines(keepends=True)
    if "gpu_memory" in resources:
        first, column = resources.lc.key("gpu_memory")
        end = first + 1
        while (
            end < len(lines)
            and lines[end].strip()
            and not lines[end].lstrip().startswith("#")
            and len(lines[end]) - len(lines[end].lstrip(" ")) > column
        ):
            end += 1
    else:
        last = list(resources)[-1]
        first, column = resources.lc.key(last)
        end = first + 1
        while end < len(lines) and lines[end].strip() and len(lines[end]) - len(lines[end].lstrip(" ")) > column:
            end += 1
        first = end
    line = f"{' ' * column}gpu_memory: {{request: {booking}, limit: {booking}}}  # {why}\n"
    new_text = "".join([*lines[:first], line, *lines[end:]])
    before = YAML(typ="safe", pure=True).load(text)
    try:
        after = YAML(typ="safe", pure=True).load(new_text)
    except YAMLError:
        after = None
    expected = {**before, "resources": {**before["resources"], "gpu_memory": {"request": booking, "limit": booking}}}
    if after != expected:
        raise refuse(
            "the spec's layout defeats an in-place edit",
            f"write `gpu_memory: {{request: {booking}, limit: {booking}}}` under resources by hand",
        )
    return new_text
