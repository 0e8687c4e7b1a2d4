"""A project's apps: find the spec files, load them all, render them all, and report every problem of
every app before anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from olarespack.errors import Problem, ProblemsError, UsageError
from olarespack.fit import resolve_context
from olarespack.render import GenerationName, RenderedChart, render_chart
from olarespack.rules_engine import engine_problems
from olarespack.rules_olares import Chart, manifest_problems
from olarespack.spec import AppSpec, load_spec


@dataclass(frozen=True)
class App:
    file: str
    spec: AppSpec
    chart: RenderedChart
    warnings: tuple[Problem, ...] = ()


def spec_files(paths: tuple[str, ...], apps_dir: Path) -> list[Path]:
    if paths:
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            raise UsageError(f"no such spec file: {', '.join(missing)}")
        return [Path(p) for p in paths]
    found = sorted(apps_dir.glob("*.yaml")) + sorted(apps_dir.glob("*.yml"))
    if not found:
        raise UsageError(f"no specs given and none found in {apps_dir}/*.yaml")
    return found


def render_apps(files: list[Path], generation: GenerationName | None = None) -> list[App]:
    """Load, check and render every spec; raise one ProblemsError listing the errors of all of them.
    The checks here are the pure layers (spec, engine flags, Olares' rules on the rendered files); helm
    and Kubernetes schemas are `olarespack lint`'s."""
    problems: list[Problem] = []
    loaded: list[tuple[str, AppSpec]] = []
    named: list[tuple[str, AppSpec]] = []
    context_warnings: dict[str, list[Problem]] = {}
    for path in files:
        try:
            spec, found = resolve_context(str(path), load_spec(path))
        except ProblemsError as exc:
            problems += exc.problems
            continue
        named.append((str(path), spec))
        errors = [p for p in found if p.severity == "error"]
        problems += errors
        context_warnings[str(path)] = [p for p in found if p.severity != "error"]
        if not errors:  # an unresolved `max_model_len: auto` cannot be rendered
            loaded.append((str(path), spec))
    problems += duplicate_names(named)
    apps: list[App] = []
    for file, spec in loaded:
        try:
            chart = render_chart(spec, file, generation)
        except ProblemsError as exc:
            problems += exc.problems
            continue
        label = f"{file} [{generation or spec.olares.generation}]"
        found = engine_problems(file, spec) + manifest_problems(Chart(label, spec.name, dict(chart)))
        problems += [p for p in found if p.severity == "error"]
        warnings = context_warnings[file] + [p for p in found if p.severity != "error"]
        apps.append(App(file, spec, chart, tuple(warnings)))
    if problems:
        raise ProblemsError(problems)
    return apps


def duplicate_names(loaded: list[tuple[str, AppSpec]]) -> list[Problem]:
    owners: dict[str, list[str]] = {}
    for file, spec in loaded:
        owners.setdefault(spec.name, []).append(file)
    return [
        Problem(file, "name", f"{name!r} is also the name in {', '.join(f for f in files if f != file)}; both "
                "would render the same chart folder", "give each app its own name", rule="duplicate-name")
        for name, files in owners.items() if len(files) > 1 for file in files
    ]
