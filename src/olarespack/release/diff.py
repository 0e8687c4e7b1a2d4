"""What a change does to the cluster: each app's chart at a base and now, rendered by helm with Olares'
values, split into resources matched by kind/name, compared as unified diffs (helm-diff's layout), plus
the Olares files (manifest, Chart.yaml, i18n) compared as files. Also the version gate: a chart whose
content changed must carry a higher version than at the base."""

from __future__ import annotations

import difflib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from olarespack.core.errors import HelmError, Problem
from olarespack.core.yamltext import load_yaml
from olarespack.helm import Helm, split_rendered, values_file
from olarespack.olares.values import olares_values
from olarespack.release import version as semver_rules
from olarespack.write import write_chart

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
        return Problem(
            self.file,
            "version",
            f"the rendered chart of {self.app} changed since the base but its "
            f"version is still {self.version}: Olares and the market ignore a changed chart whose "
            "version did not rise",
            "run olarespack bump --patch (or --minor)",
            rule="version-gate",
        )


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
        changes.append(
            ResourceChange(
                key,
                kind,
                _unified(before[1] if before else "", after[1] if after else "", key),
                before[0] if before else None,
                after[0] if after else None,
            )
        )
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
            out.append(
                style(f"{diff.app}, {change.key} {verb}:", fg="yellow", bold=True)
                if color
                else f"{diff.app}, {change.key} {verb}:"
            )
            for line in change.diff:
                if color and line.startswith("+"):
                    line = style(line, fg="green")
                elif color and line.startswith("-"):
                    line = style(line, fg="red")
                out.append(line)
            out.append("")
    return "\n".join(out)


def as_markdown(diffs: list[AppDiff]) -> str:
    """The pull-request comment's diff (release/markdown.py, which reads AppDiff from here)."""
    from olarespack.release.markdown import as_markdown as comment

    return comment(diffs)


def as_json(diffs: list[AppDiff]) -> str:
    return json.dumps(
        [
            {
                "app": d.app,
                "file": d.file,
                "base_version": d.base_version,
                "version": d.version,
                "version_raised": d.version_raised,
                "summary": summary(d),
                "changes": [{"resource": c.key, "change": c.change, "diff": list(c.diff)} for c in d.changes],
            }
            for d in diffs
        ],
        indent=2,
    )


def diff_apps(
    helm: Helm,
    apps: list[tuple[str, str, dict[str, str]]],
    base_charts: dict[str, dict[str, str]],
) -> list[AppDiff]:
    """apps: (spec file, version, rendered chart) keyed by app name in base_charts (the charts at the base)."""
    diffs = []
    for (file, version, chart), (name, base) in zip(apps, base_charts.items(), strict=True):
        diffs.append(AppDiff(name, file, chart_version(base), version, chart_changes(helm, name, base, chart)))
    return diffs
