"""A project's apps: find the spec files, load them all, render them all, and report every problem of
every app before anything is written."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem, ProblemsError, SpecError, UsageError
from olarespack.core.hardware import OlaresDriver, driver_for, olares_drivers
from olarespack.core.yamlfile import load_spec_data
from olarespack.engines import engine_for, engine_problems
from olarespack.engines.cuda import check as cuda_check
from olarespack.fit.budget import resolve_context
from olarespack.fit.record import impossible_bench, stale_bench
from olarespack.olares.chartfiles import chart_problems
from olarespack.olares.generations import GenerationName, app_id
from olarespack.olares.versions import lowest_admitted
from olarespack.render import MarkerLeftover, render_chart
from olarespack.spec.load import RefusedSpec, load_spec
from olarespack.spec.models import AppSpec
from olarespack.spec.rules import env_warnings


@dataclass(frozen=True)
class LoadedSpec:
    """One spec as every command takes it: loaded, checked, its context resolved as the build resolves it (an
    `auto` context becomes the largest that fits), with what that found."""

    file: str
    spec: AppSpec
    problems: tuple[Problem, ...] = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def load_resolved(path: Path, label: str | None = None, strict: bool = True) -> LoadedSpec:
    """The spec at `path` (named `label` in messages) with its context resolved. strict: a context error is a
    ProblemsError, as the build makes it; otherwise it is returned with the spec as written (a move or a
    sweep may be what makes it fit), the render refusing an `auto` context still unresolved."""
    shown = label or str(path)
    spec, found = resolve_context(shown, load_spec(path))
    loaded = LoadedSpec(shown, spec, tuple(found))
    if strict and loaded.errors:
        raise ProblemsError(loaded.errors)
    return loaded


def check_app(file: str, spec: AppSpec, charts: list[Chart]) -> list[Problem]:
    """The checks of a rendered app that need no tool: what its engine would refuse (engine rules) and what
    Olares would refuse in its chart's files (the manifest rules). Build and lint both run exactly this, once
    per app: spec-level findings once, chart-level findings once per generation rendered."""
    return (
        engine_problems(file, spec)
        + env_warnings(file, spec)
        + _bench_problems(file, spec)
        + _cuda_problems(file, spec, charts)
        + [problem for chart in charts for problem in chart_problems(chart)]
    )


def lowest_driver(charts: list[Chart]) -> OlaresDriver | None:
    """The driver of the oldest Olares release the charts' manifests admit: a chart the market installs there
    must start there (lint and publish render both generations, so that is 1.12.3 for every spec)."""
    lowest = lowest_admitted([chart.manifest for chart in charts], list(olares_drivers()))
    return driver_for(lowest) if lowest else None


def _cuda_problems(file: str, spec: AppSpec, charts: list[Chart]) -> list[Problem]:
    """The image's CUDA against the driver of the oldest Olares its charts install on: those of every generation
    the market publishes, whichever this command rendered (build renders the spec's own; lint and publish both),
    so every command names the same oldest Olares."""
    every = list(charts)
    for gen in spec.offered_generations():
        with contextlib.suppress(ProblemsError):  # a generation that does not render is reported where it is
            every.append(render_chart(spec, file, gen))
    driver = lowest_driver(every)
    if driver is None:
        return []
    bound = engine_for(spec.engine)
    found = cuda_check(
        file,
        bound.engine.image_cuda(spec.engine.image),
        driver,
        bound.kind,
        bound.title,
        ", the oldest Olares the app's charts install on",
    )
    return [found] if found else []


def _bench_problems(file: str, spec: AppSpec) -> list[Problem]:
    """A recorded bench whose speed settings are no longer the spec's (its cited figures print marked stale), or
    whose figures cannot be."""
    stale, impossible = stale_bench(spec), impossible_bench(spec)
    return (
        [Problem(file, stale.path, stale.message, stale.fix, rule="bench-stale", severity="warning")] if stale else []
    ) + (
        [Problem(file, impossible.path, impossible.message, impossible.fix, rule="bench-impossible")]
        if impossible
        else []
    )


def refused_spec_problems(file: str, spec: AppSpec) -> list[Problem]:
    """The problems of the layers after the spec's, for a spec its own rules refused: the context, what the
    engine would refuse or warn of and what its citations get wrong show in the same run as the spec's
    mistakes."""
    spec, found = resolve_context(file, spec)
    problems = found + engine_problems(file, spec)
    if any(p.severity == "error" for p in found):
        return problems  # an unresolved or unfitting context is not rendered (as in a build)
    try:
        render_chart(spec, file)
    except MarkerLeftover:
        pass  # the spec's guards named the field that holds it
    except ProblemsError as exc:
        problems += exc.problems
    return problems


@dataclass(frozen=True)
class App:
    """One spec, loaded and checked, with its chart rendered for each generation asked."""

    file: str
    spec: AppSpec
    charts: dict[GenerationName, Chart]
    warnings: tuple[Problem, ...] = ()

    @property
    def chart(self) -> Chart:
        """The chart of the first generation asked (the spec's own unless one was forced)."""
        return next(iter(self.charts.values()))


def spec_files(paths: tuple[str, ...], apps_dir: Path) -> list[Path]:
    if paths:
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            raise UsageError(f"no such spec file: {', '.join(missing)}")
        return [Path(p) for p in paths]
    found = sorted(apps_dir.glob("*.yaml")) + sorted(apps_dir.glob("*.yml"))
    if not found and not apps_dir.is_dir():
        raise UsageError(
            f"no specs given and no {apps_dir}/ folder: run in the repository's root, or give "
            "--apps-dir (olarespack init lays a repository out)"
        )
    return found  # an apps folder still empty (a new repository) has nothing to do yet


def load_apps(
    files: list[Path], generations: Sequence[GenerationName] | None = None, others: dict[str, str] | None = None
) -> tuple[list[App], list[Problem]]:
    """Load, check and render every spec for each generation (default: the spec's own); the apps that
    passed, and every problem of those that did not (their warnings too: lint shows every layer's problems in
    one run, not the warnings once the errors are gone). The checks are the pure layers (spec, engine flags,
    Olares' rules on the rendered files), each run once; helm and Kubernetes schemas are lint's."""
    problems: list[Problem] = []
    named: list[tuple[str, AppSpec]] = []
    apps: list[App] = []
    for path in files:
        file = str(path)
        try:
            spec, found = resolve_context(file, load_spec(path))
            named.append((file, spec))
            if any(p.severity == "error" for p in found):  # an unresolved `auto` context cannot be rendered
                # the engine's own rules still run: a copied spec shows its drafter, parser and calibration
                # mistakes, and its warnings (a release no table covers), together with its context
                problems += found + engine_problems(file, spec)
                continue
        except RefusedSpec as exc:  # the spec's own mistakes do not hide the later layers' behind them
            problems += exc.problems + refused_spec_problems(file, exc.spec)
            continue
        except ProblemsError as exc:
            problems += exc.problems
            continue
        try:
            charts = {
                gen: render_chart(spec, file, gen)
                for gen in (generations or [spec.olares.generation])
                if gen in spec.offered_generations()
            }
        except ProblemsError as exc:  # a citation's mistake does not hide the engine's behind it
            problems += exc.problems + found + engine_problems(file, spec)
            continue
        checked = found + check_app(file, spec, list(charts.values()))
        errors = [p for p in checked if p.severity == "error"]
        problems += errors
        if not errors:
            apps.append(App(file, spec, charts, tuple(p for p in checked if p.severity != "error")))
    clashes = duplicate_names(named, others)
    clashing = {p.file for p in clashes}
    return [app for app in apps if app.file not in clashing], problems + clashes


def render_apps(
    files: list[Path], generations: Sequence[GenerationName] | None = None, others: dict[str, str] | None = None
) -> list[App]:
    """load_apps, raising one ProblemsError with the errors of all specs when any has one."""
    apps, problems = load_apps(files, generations, others)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ProblemsError(errors)
    return apps


def duplicate_names(loaded: list[tuple[str, AppSpec]], others: dict[str, str] | None = None) -> list[Problem]:
    """Two apps that would share a chart folder (one name) or a market entry (one id: md5(name)[:8], so
    distinct names can collide). `others` maps further app names to their files, e.g. the specs beside
    the ones given, so a build of one spec still sees its neighbours."""
    names: dict[str, list[str]] = {}
    for file, spec in loaded:
        names.setdefault(spec.name, []).append(file)
    for name, file in (others or {}).items():
        if file not in names.get(name, []):
            names.setdefault(name, []).append(file)
    problems = [
        Problem(
            file,
            "name",
            f"{name!r} is also the name in {', '.join(f for f in files if f != file)}; both "
            "would render the same chart folder",
            "give each app its own name",
            rule="duplicate-name",
        )
        for name, files in names.items()
        if len(files) > 1
        for file in files
        if file in dict(loaded)
    ]
    ids: dict[str, list[str]] = {}
    for name in names:
        ids.setdefault(app_id(name), []).append(name)
    for ident, clashing in ids.items():
        if len(clashing) < 2:
            continue
        for name in clashing:
            for file in names[name]:
                if file not in dict(loaded):
                    continue
                rivals = ", ".join(f"{other!r} ({', '.join(names[other])})" for other in clashing if other != name)
                problems.append(
                    Problem(
                        file,
                        "name",
                        f"{name!r} has the Olares app id {ident} (md5 of the name), as {rivals} does: "
                        "the market would show only one of them",
                        "rename one of the apps",
                        rule="duplicate-id",
                    )
                )
    return problems


def sibling_names(folder: Path, given: list[Path]) -> dict[str, str]:
    """name -> file of the other specs in the apps folder, when the given specs live there (a spec kept
    elsewhere is an ad-hoc build); a spec that does not parse names nobody."""
    chosen = {p.resolve() for p in given}
    found: dict[str, str] = {}
    if not any(p.parent == folder.resolve() for p in chosen):
        return found
    for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
        if path.resolve() in chosen:
            continue
        try:
            data = load_spec_data(path)
        except SpecError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            found.setdefault(data["name"], str(path))
    return found


def orphan_charts(charts_dir: Path, names: set[str]) -> list[Problem]:
    """Chart folders no spec renders any more: a removed or renamed spec leaves its chart behind."""
    if not charts_dir.is_dir():
        return []
    return [
        Problem(
            str(folder),
            "",
            "no spec renders this chart (its spec was removed or renamed)",
            f"remove it (git rm -r {folder}) or restore its spec",
            rule="orphan-chart",
        )
        for folder in sorted(charts_dir.iterdir())
        if folder.is_dir() and not folder.name.startswith(".") and folder.name not in names
    ]
