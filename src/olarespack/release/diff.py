"""What a change does to the cluster: each app's chart at a base and now, rendered by helm with Olares'
values, split into resources matched by kind/name, compared as unified diffs (helm-diff's layout), plus
the Olares files (manifest, Chart.yaml, i18n) compared as files. Also the version gate: a chart whose
content changed must carry a higher version than at the base."""

from __future__ import annotations

import contextlib
import difflib
import html
import json
import re
import tempfile
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any, Literal

from olarespack.errors import HelmError, Problem
from olarespack.helm import Helm, split_rendered, values_file
from olarespack.olares.values import olares_values
from olarespack.release import version as semver_rules
from olarespack.write import write_chart
from olarespack.yamltext import load_yaml

Change = Literal["added", "removed", "changed"]


@dataclass(frozen=True)
class ResourceChange:
    key: str  # Kind/name for rendered resources, the chart-relative path for Olares files
    change: Change
    diff: tuple[str, ...]
    old: dict[str, Any] | None = None
    new: dict[str, Any] | None = None


@dataclass(frozen=True)
class AppDiff:
    app: str
    file: str
    base_version: str | None  # None: the app is new at this base
    version: str
    changes: tuple[ResourceChange, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def version_raised(self) -> bool:
        return self.base_version is None or semver_rules.is_higher(self.version, self.base_version)

    def gate_problem(self) -> Problem | None:
        if not self.changed or self.version_raised:
            return None
        return Problem(self.file, "version", f"the rendered chart of {self.app} changed since the base but its "
                       f"version is still {self.version}: Olares and the market ignore a changed chart whose "
                       "version did not rise", "run olarespack bump --patch (or --minor)", rule="version-gate")


def _unified(old: str, new: str, name: str) -> tuple[str, ...]:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{name}", f"b/{name}", lineterm="", n=3)
    return tuple(list(lines)[2:])  # the ---/+++ header is said by the resource line instead


def _rendered(helm: Helm, files: dict[str, str], app: str, root: Path) -> dict[str, tuple[dict[str, Any], str]]:
    if not files:
        return {}
    folder = root / app
    write_chart(files, folder)
    with values_file(olares_values(app)) as values:
        out = helm.template(folder, app, f"{app}-alice", values)
    if not out.ok:
        raise HelmError(f"helm template of {app} failed: {out.stderr.strip()}")
    resources = {}
    for _, document, text in split_rendered(out.stdout):
        key = f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"
        body = "\n".join(line for line in text.strip("\n").splitlines() if not line.startswith("# Source:"))
        resources[key] = (document, body + "\n")
    return resources


def chart_changes(helm: Helm, app: str, base: dict[str, str], now: dict[str, str]) -> tuple[ResourceChange, ...]:
    changes: list[ResourceChange] = []
    for path in sorted(set(base) | set(now)):
        if path.startswith("templates/") or base.get(path) == now.get(path):
            continue
        kind: Change = "added" if path not in base else "removed" if path not in now else "changed"
        changes.append(ResourceChange(path, kind, _unified(base.get(path, ""), now.get(path, ""), path)))
    with tempfile.TemporaryDirectory(prefix="olarespack-diff-") as tmp:
        old = _rendered(helm, base, app, Path(tmp) / "base")
        new = _rendered(helm, now, app, Path(tmp) / "now")
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before and after and before[1] == after[1]:
            continue
        kind = "added" if before is None else "removed" if after is None else "changed"
        changes.append(ResourceChange(key, kind, _unified(before[1] if before else "", after[1] if after else "", key),
                                      before[0] if before else None, after[0] if after else None))
    return tuple(changes)


def chart_version(files: dict[str, str]) -> str | None:
    chart = load_yaml(files["Chart.yaml"]) if "Chart.yaml" in files else None
    return str(chart["version"]) if isinstance(chart, dict) and "version" in chart else None


# --------------------------------------------------------------------------- summaries and formats


def _engine_args(document: dict[str, Any] | None) -> tuple[str | None, list[str]]:
    if not document:
        return None, []
    containers = ((document.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    if not containers:
        return None, []
    return containers[0].get("image"), [str(a) for a in containers[0].get("args") or []]


def _flags(args: list[str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    for i, arg in enumerate(args):
        if arg.startswith("-"):
            following = args[i + 1] if i + 1 < len(args) else ""
            flags[arg] = "" if following.startswith("--") else following
    return flags


def summary(diff: AppDiff) -> str:
    """One line a person would write in a changelog: engine flags changed, then the other resources."""
    parts: list[str] = []
    others: list[str] = []
    for change in diff.changes:
        if change.key.startswith("Deployment/") and change.change == "changed":
            old_image, old_args = _engine_args(change.old)
            new_image, new_args = _engine_args(change.new)
            if old_image != new_image:
                parts.append(f"image {old_image} -> {new_image}")
            before, after = _flags(old_args), _flags(new_args)
            for flag in sorted(set(before) | set(after)):
                if flag not in after:
                    parts.append(f"drop {flag}")
                elif flag not in before:
                    parts.append(f"add {flag} {after[flag]}".rstrip())
                elif before[flag] != after[flag]:
                    parts.append(f"{flag} {before[flag]} -> {after[flag]}")
            if old_image == new_image and before == after:
                others.append(change.key)
        elif not change.key.startswith(("OlaresManifest.yaml", "i18n/")):
            others.append(f"{change.key} {change.change}")
    if any(c.key.startswith(("OlaresManifest.yaml", "i18n/")) for c in diff.changes) and not parts and not others:
        others.append("descriptions and manifest")
    text = "; ".join(parts + ([f"also {', '.join(others)}"] if others else []))
    return text or "no rendered change"


def as_text(diffs: list[AppDiff], color: bool) -> str:
    from click import style

    out: list[str] = []
    for diff in diffs:
        for change in diff.changes:
            verb = {"added": "has been added", "removed": "has been removed", "changed": "has changed"}[change.change]
            out.append(style(f"{diff.app}, {change.key} {verb}:", fg="yellow", bold=True) if color
                       else f"{diff.app}, {change.key} {verb}:")
            for line in change.diff:
                if color and line.startswith("+"):
                    line = style(line, fg="green")
                elif color and line.startswith("-"):
                    line = style(line, fg="red")
                out.append(line)
            out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- markdown (a PR comment)
# What a box sees first, then the pods field by field (args per argument, JSON values per key), then the other
# resources, then the chart's own files folded: a line repeated across files is shown once, and a long line
# that only restates a change said above (the preset section's engine-args line) is named in one line.

_LONG = 100  # a file line longer than this that restates a change is named, not shown
_EXCERPT = 40  # characters kept on either side of the change in a longer line
_WORD = re.compile(r"\s+|[\w\-/]+(?:\.[\w\-/]+)*|[^\w\s]")  # 0.94 and v1.2.0 are one word, "160K." is not
_CONTAINERS = re.compile(r"(^|\.)(initContainers|containers)\[")
Setting = tuple[str, str | None, str | None]  # what, before (None: added), after (None: removed)
EMPTY = '""'


@dataclass
class _Said:
    """The words of the changes stated so far: a file line whose edits use only these restates them."""

    old: set[str] = field(default_factory=set)
    new: set[str] = field(default_factory=set)

    def add(self, old: str | None, new: str | None) -> None:
        self.old |= _words(old or "")
        self.new |= _words(new or "")

    def covers(self, removed: set[str], added: set[str]) -> bool:
        return bool(removed or added) and removed <= self.old and added <= self.new


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text) if not w.isspace()}


def _fence(lines: list[str] | tuple[str, ...], mark: str = "```") -> str:
    runs = [len(r) for line in lines for r in re.findall(f"{mark[0]}+", line)]
    return mark[0] * max(len(mark), max(runs, default=0) + 1)


def _code(text: str) -> str:
    """A markdown code span for any text (a longer fence when it holds backticks)."""
    fence = _fence([text], "`")
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _short(text: str, limit: int = 80) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else f"{text[:limit // 2 - 1]}…{text[-(limit // 2 - 1):]}"


def _flatten(value: Any, path: str = "", out: dict[str, str] | None = None) -> dict[str, str]:
    """path -> scalar text; items of lists keyed by their name when they all have one, JSON objects in
    strings by key (SPEC_CONFIG.num_speculative_tokens)."""
    out = {} if out is None else out
    if isinstance(value, str) and value.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            value = json.loads(value) if isinstance(json.loads(value), dict) else value
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value:
        names = [item.get("name") if isinstance(item, dict) else None for item in value]
        named = all(isinstance(n, str) for n in names) and len(set(names)) == len(names)
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{names[i] if named else i}]", out)
    else:
        out[path] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not arg[1:2].isdigit()


def _arguments(args: list[Any]) -> dict[str, str]:
    """An argv by argument: `--flag` -> its value ("" for a switch), the others by position."""
    items: dict[str, str] = {}
    i, position = 0, 0
    while i < len(args):
        arg = str(args[i])
        value = str(args[i + 1]) if _is_flag(arg) and i + 1 < len(args) and not _is_flag(str(args[i + 1])) else None
        if not _is_flag(arg):
            position += 1
            items[f"argument {position}"] = arg
        else:  # a repeated flag (--lora-modules a --lora-modules b): one key per occurrence
            repeat = sum(1 for key in items if key == arg or key.startswith(f"{arg} #"))
            items[f"{arg} #{repeat + 1}" if repeat else arg] = value or ""
        i += 1 if value is None else 2
    return items


def _changes(old: dict[str, str], new: dict[str, str], prefix: str = "") -> list[Setting]:
    return [(f"{prefix}{key}", old.get(key), new.get(key)) for key in [*new, *(k for k in old if k not in new)]
            if old.get(key) != new.get(key)]


def _container_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Setting]:
    args = [_arguments(c.get("args") or []) for c in (old, new)]
    found = _changes(_flatten(args[0]), _flatten(args[1]))
    if list(args[0]) != list(args[1]) and args[0] == args[1]:
        found.append(("argument order", " ".join(args[0]), " ".join(args[1])))
    env = [_flatten({str(e.get("name")): e.get("value", {k: v for k, v in e.items() if k != "name"})
                     for e in c.get("env") or []}) for c in (old, new)]
    rest = [_flatten({k: v for k, v in c.items() if k not in ("args", "env", "name")}) for c in (old, new)]
    return found + _changes(env[0], env[1], "env ") + _changes(rest[0], rest[1])


def _say(key: str, old: str | None, new: str | None) -> str:
    if old is None or new is None:
        return _code(f"add {key} {_short(new or '')}".rstrip() if old is None else f"drop {key}")
    if "\n" in old or "\n" in new:
        lines = sum(1 for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:1] in "+-")
        return f"{_code(key)}: {lines} line(s) changed (rendered diff below)"
    return _code(f"{key} {_short(old or EMPTY)} -> {_short(new or EMPTY)}")


def _pod_spec(document: dict[str, Any] | None) -> dict[str, Any]:
    spec = (document or {}).get("spec") or {}
    if (document or {}).get("kind") == "Pod":
        return dict(spec)
    template = spec.get("template") or ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    return dict(template.get("spec") or {})


def _pod_lines(change: ResourceChange, said: _Said) -> list[str]:
    """A changed workload's settings, each once: per container, then the rest of the resource."""
    old, new = _pod_spec(change.old), _pod_spec(change.new)
    lines: list[str] = []
    for group, label in (("initContainers", "init container"), ("containers", "container")):
        before = {str(c.get("name")): c for c in old.get(group) or []}
        after = {str(c.get("name")): c for c in new.get(group) or []}
        for name in [*after, *(n for n in before if n not in after)]:
            if name not in after or name not in before:
                image = str((after.get(name) or before.get(name) or {}).get("image", ""))
                lines.append(f"- {label} {_code(name)} {'added' if name in after else 'removed'} ({_code(image)})")
                continue
            found = _container_changes(before[name], after[name])
            lines += [f"- {label} {_code(name)}:"] if found else []
            for key, was, now in found:
                lines.append(f"  - {_say(key, was, now)}")
                said.add(None if was is None else f"{key} {was}", None if now is None else f"{key} {now}")
    rest = [{k: v for k, v in _flatten(d or {}).items() if not _CONTAINERS.search(k)} for d in (change.old, change.new)]
    for key, was, now in _changes(rest[0], rest[1]):
        lines.append(f"- {_say(key, was, now)}")
        said.add(was, now)
    return lines


def _line_pairs(diff: tuple[str, ...]) -> list[tuple[str | None, str | None]]:
    """A unified diff's removed and added lines, paired in order within each run of edits."""
    pairs: list[tuple[str | None, str | None]] = []
    runs: tuple[list[str], list[str]] = ([], [])
    for line in (*diff, " "):
        if line[:1] not in "-+" or (line[:1] == "-" and runs[1]):
            pairs += [(a if i < len(runs[0]) else None, b if i < len(runs[1]) else None)
                      for i, (a, b) in enumerate(zip_longest(*runs, fillvalue=""))]
            runs[0].clear()
            runs[1].clear()
        if line[:1] in "-+":
            runs[line[:1] == "+"].append(line[1:])
    return pairs


def _edits(old: str, new: str) -> tuple[set[str], set[str], tuple[int, int], tuple[int, int]]:
    """The words removed and added, and the spans of old and of new (in characters) that changed."""
    a, b = _WORD.findall(old), _WORD.findall(new)
    removed: set[str] = set()
    added: set[str] = set()
    spans: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed |= {w for w in a[i1:i2] if not w.isspace()}
            added |= {w for w in b[j1:j2] if not w.isspace()}
            spans.append((len("".join(a[:i1])), len("".join(a[:i2])), len("".join(b[:j1])), len("".join(b[:j2]))))
    spans = spans or [(0, len(old), 0, len(new))]
    return removed, added, (spans[0][0], spans[-1][1]), (spans[0][2], spans[-1][3])


def _excerpt(text: str, span: tuple[int, int]) -> str:
    if len(text) <= _LONG + 2 * _EXCERPT:
        return text
    start = max(span[0] - _EXCERPT, 0)
    end = min(span[1] + _EXCERPT, start + _LONG + 2 * _EXCERPT, len(text))  # bounded, whatever changed
    return f"{'…' if start else ''}{text[start:end]}{'…' if end < len(text) else ''}"


def _file_block(changes: list[ResourceChange], said: _Said) -> list[str]:
    """The chart's own files in one diff block: a line repeated across files shown once under all their
    names, a long line that only restates what is said above named in one line."""
    groups: dict[tuple[str | None, str | None], list[str]] = {}
    for change in changes:
        for old, new in _line_pairs(change.diff):
            files = groups.setdefault((None if old is None else old.strip(), None if new is None else new.strip()), [])
            files += [] if change.key in files else [change.key]
    body: list[str] = []
    header = ""
    for (old, new), files in groups.items():
        if header != (header := f"@@ {', '.join(files)} @@"):
            body.append(header)
        removed, added, old_span, new_span = _edits(old or "", new or "")
        if old is not None and new is not None and len(new) > _LONG and said.covers(removed, added):
            body.append(f" {new[:min(new_span[0], 60)].rstrip()}…  (same change as above)")
            continue
        said.add(" ".join(removed), " ".join(added))
        body += [f"-{_excerpt(old, old_span)}"] if old is not None else []
        body += [f"+{_excerpt(new, new_span)}"] if new is not None else []
    fence = _fence(body)
    return [f"{fence}diff", *body, fence]


def _box(diff: AppDiff, pods: list[ResourceChange], others: list[ResourceChange], files: list[ResourceChange],
         note: str) -> str:
    """What a box running the base version sees."""
    if diff.base_version is None:
        return f"New app: a box can install {diff.version}."
    head = (f"A box on {diff.base_version} is offered {diff.version}:" if diff.version_raised else
            f"A box on {diff.base_version} is offered **no upgrade**: the chart changed but its version did not "
            "rise (run `olarespack bump --patch`). Once raised:")
    parts = [note.rstrip(".")]
    parts += ["the pods are not restarted"] if pods and all(_pod_spec(c.old) == _pod_spec(c.new) for c in pods) else []
    parts += [f"{len(others)} other resource(s) change"] if others else []
    parts += [f"{len(files)} chart file(s) change"] if files else []
    return f"{head} {'; '.join(parts)}."


def _details(summary_html: str, lines: tuple[str, ...]) -> list[str]:
    fence = _fence(lines)
    return [f"<details><summary>{summary_html}</summary>\n", f"{fence}diff", *lines, f"{fence}\n</details>\n"]


def as_markdown(diffs: list[AppDiff]) -> str:
    from olarespack.release.notes import upgrade_note  # notes reads AppDiff from here

    out: list[str] = []
    for diff in (d for d in diffs if d.changed):
        gate = "" if diff.version_raised else " **(version not raised)**"
        out.append(f"### `{diff.app}` {diff.base_version or 'new'} -> {diff.version}{gate}\n")
        pods = [c for c in diff.changes if _pod_spec(c.old) or _pod_spec(c.new)]
        others = [c for c in diff.changes if c not in pods and (c.old or c.new)]
        files = [c for c in diff.changes if c not in pods and c not in others]
        note = upgrade_note(diff)
        out.append(f"{_box(diff, pods, others, files, note)}\n")
        said = _Said()
        said.add(f"{diff.base_version} {note}", f"{diff.version} {note}")  # "Context 128K -> 160K" is said
        out += ["#### Pods\n"] if pods else []
        for change in pods:
            lines = _pod_lines(change, said) if change.change == "changed" else []
            out += [f"`{change.key}` {change.change}" + (":\n" if lines else "\n"), *lines, *([""] if lines else [])]
            out += _details(f"<code>{html.escape(change.key)}</code> {change.change}", change.diff)
        out += ["#### Other resources\n"] if others else []
        for change in others:
            out += _details(f"<code>{html.escape(change.key)}</code> {change.change}", change.diff)
            said.add("\n".join(change.diff), "\n".join(change.diff))
        if files:
            names = ", ".join(html.escape(c.key) for c in files)
            out += ["#### Chart files and store listing\n", f"<details><summary>{len(files)} file(s): {names}"
                    "</summary>\n", *_file_block(files, said), "</details>\n"]
    return "\n".join(out) if out else "No rendered change.\n"


def as_json(diffs: list[AppDiff]) -> str:
    return json.dumps([{"app": d.app, "file": d.file, "base_version": d.base_version, "version": d.version,
                        "version_raised": d.version_raised, "summary": summary(d),
                        "changes": [{"resource": c.key, "change": c.change, "diff": list(c.diff)} for c in d.changes]}
                       for d in diffs], indent=2)


def diff_apps(helm: Helm, apps: list[tuple[str, str, dict[str, str]]], base_charts: dict[str, dict[str, str]],
              ) -> list[AppDiff]:
    """apps: (spec file, version, rendered chart) keyed by app name in base_charts (the charts at the base)."""
    diffs = []
    for (file, version, chart), (name, base) in zip(apps, base_charts.items(), strict=True):
        diffs.append(AppDiff(name, file, chart_version(base), version, chart_changes(helm, name, base, chart)))
    return diffs
