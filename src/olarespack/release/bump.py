"""Comparing the apps with a git base: rendered diffs, the version gate, and bumps (plan, then apply)."""

from __future__ import annotations

import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem, ProblemsError, SpecError
from olarespack.core.yamlfile import MAX_FILE, parse_yaml
from olarespack.helm import Helm
from olarespack.project import App, render_apps
from olarespack.release import git as gitref
from olarespack.release.diff import AppDiff, diff_apps
from olarespack.release.edit import SpecEdit, edit_spec
from olarespack.release.notes import stale_figures, upgrade_note
from olarespack.release.version import Part, is_higher, is_version
from olarespack.spec.inplace import read_spec_text, write_spec_text
from olarespack.write import read_folder, write_chart


@dataclass(frozen=True)
class Repo:
    root: Path
    base: str  # a commit id
    charts_dir: Path

    @classmethod
    def at(cls, cwd: Path, base: str | None, charts_dir: Path) -> Repo:
        root = gitref.repo_root(cwd)
        commit = gitref.resolve(root, base) if base else gitref.default_base(root)
        return cls(root, commit, charts_dir)

    def base_chart(self, name: str) -> dict[str, str]:
        folder = (self.charts_dir / name).resolve().relative_to(self.root.resolve()).as_posix()
        return gitref.folder_at(self.root, self.base, folder)

    def _spec_at_base(self, file: Path) -> dict[str, Any] | None:
        """A spec file's data at the base, when the file was there and loads."""
        try:
            relative = file.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None
        text = gitref.show(self.root, self.base, relative)
        if text is None or len(text) > MAX_FILE:
            return None
        try:
            data: Any = parse_yaml(relative, text)
        except SpecError:
            return None
        return data if isinstance(data, dict) else None

    def spec_version(self, file: Path) -> str | None:
        """The version a spec file said at the base, when the file was there (its chart need not be)."""
        version = (self._spec_at_base(file) or {}).get("version")
        return version if is_version(version) else None

    def sweep_released(self, file: Path, version: str, sweep: dict[str, Any]) -> bool:
        """Whether a version's sweep record was already there at the base (released with that version)."""
        changelog = (self._spec_at_base(file) or {}).get("changelog")
        entries = changelog if isinstance(changelog, list) else []
        return any(
            isinstance(entry, dict) and str(entry.get("version")) == version and entry.get("sweep") == sweep
            for entry in entries
        )


def diffs(helm: Helm, repo: Repo, files: list[Path]) -> tuple[list[App], list[AppDiff]]:
    apps = render_apps(files)
    bases = {app.spec.name: repo.base_chart(app.spec.name) for app in apps}
    found = diff_apps(helm, [(app.file, app.spec.version, dict(app.chart)) for app in apps], bases)
    return apps, found


def gate_problems(found: list[AppDiff]) -> list[Problem]:
    return [problem for diff in found if (problem := diff.gate_problem()) is not None]


@dataclass(frozen=True)
class Bump:
    edit: SpecEdit
    name: str
    chart: Chart
    note: str
    warnings: tuple[str, ...] = ()  # claims of the descriptions a changed setting made stale


def plan_bumps(
    helm: Helm, repo: Repo, files: list[Path], explicit: bool, part: Part, note: str | None, today: dt.date
) -> tuple[list[Bump], list[str]]:
    """Every bump validated and rendered in memory before anything is written; messages for apps left alone."""
    apps, found = diffs(helm, repo, files)
    bumps: list[Bump] = []
    skipped: list[str] = []
    problems: list[Problem] = []
    for app, diff in zip(apps, found, strict=True):
        if not explicit and not diff.changed:
            continue
        if diff.base_version is None:  # no chart at the base: nothing of it is out, so its version is its first
            skipped.append(
                f"{app.spec.name}: new in this market, ships as {diff.version} (the version it is "
                "written with; bump it once it is published)"
            )
            continue
        # a SPEC named on the command line is bumped even when its chart did not change
        ahead = None if explicit else _released_ahead(repo, app, diff)
        if ahead:
            skipped.append(f"{app.spec.name}: {ahead}, left alone")
            continue
        dirty = hand_edited(repo, app)
        if dirty:
            problems.append(dirty)
            continue
        text = note or (upgrade_note(diff) if diff.changed else None)
        if not text:
            problems.append(
                Problem(
                    app.file,
                    "changelog",
                    "nothing changed in the rendered chart since the base",
                    "say what this release is with --note",
                    rule="bump",
                )
            )
            continue
        path = Path(app.file)
        try:
            spec_text = read_spec_text(path)
            edit = edit_spec(path, spec_text, part, text, today, carry_sweep=_unreleased_sweep(repo, path, spec_text))
            bumps.append(Bump(edit, app.spec.name, _render_edit(edit), text, tuple(stale_figures(diff))))
        except ProblemsError as exc:
            problems += exc.problems
    if problems:
        raise ProblemsError(problems)
    return bumps, skipped


def _unreleased_sweep(repo: Repo, path: Path, text: str) -> bool:
    """Whether the newest entry holds a sweep written since the base (`bench sweep ... --write`): the setting it
    chose is what this bump releases, so the record moves into the new entry."""
    data: Any = parse_yaml(str(path), text)
    changelog = data.get("changelog") if isinstance(data, dict) else None
    top = changelog[0] if isinstance(changelog, list) and changelog and isinstance(changelog[0], dict) else {}
    sweep = top.get("sweep")
    return isinstance(sweep, dict) and not repo.sweep_released(path, str(top.get("version")), sweep)


def _released_ahead(repo: Repo, app: App, diff: AppDiff) -> str | None:
    """Why a bump without SPEC leaves an app alone: its version is already above its base's."""
    base = diff.base_version or repo.spec_version(Path(app.file))
    if base and is_higher(diff.version, base):
        return f"already {diff.version} (base {base})"
    return None


def hand_edited(repo: Repo, app: App) -> Problem | None:
    """A chart folder that is neither the base's chart nor what the spec renders has edits a bump would lose."""
    folder = repo.charts_dir / app.spec.name
    on_disk = {path: data.decode("utf-8", errors="replace") for path, data in read_folder(folder).items()}
    if not on_disk or (app.charts and on_disk == dict(app.chart)) or on_disk == repo.base_chart(app.spec.name):
        return None
    return Problem(
        str(folder),
        "",
        "has edits that are not in the spec (a bump re-renders it and would lose them)",
        f"move the change into {app.file}, or restore the folder with git",
        rule="bump",
    )


def _render_edit(edit: SpecEdit) -> Chart:
    with tempfile.TemporaryDirectory(prefix="olarespack-bump-") as tmp:
        candidate = Path(tmp) / edit.file.name
        candidate.write_text(edit.text, encoding="utf-8")
        [app] = render_apps([candidate])
    return app.chart


def apply_bumps(bumps: list[Bump], charts_dir: Path) -> None:
    for planned in bumps:
        write_spec_text(planned.edit.file, planned.edit.text)
        write_chart(planned.chart, charts_dir / planned.name)
