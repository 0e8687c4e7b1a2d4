"""The checks of a rendered app that need no tool: what its engine would refuse (engine rules) and what
Olares would refuse in its chart's files (the manifest rules). Build and lint both run exactly this, once
per app: spec-level findings once, chart-level findings once per generation rendered."""

from __future__ import annotations

from olarespack.chart import Chart
from olarespack.engines import engine_problems
from olarespack.errors import Problem, ProblemsError
from olarespack.fit.budget import resolve_context
from olarespack.olares.chartfiles import chart_problems
from olarespack.render import MarkerLeftover, render_chart
from olarespack.spec.models import AppSpec


def check_app(file: str, spec: AppSpec, charts: list[Chart]) -> list[Problem]:
    return engine_problems(file, spec) + [problem for chart in charts for problem in chart_problems(chart)]


def refused_spec_problems(file: str, spec: AppSpec) -> list[Problem]:
    """The errors of the layers after the spec's, for a spec its own rules refused: the context, what the
    engine would refuse and what its citations get wrong show in the same run as the spec's mistakes."""
    spec, found = resolve_context(file, spec)
    problems = [p for p in found + engine_problems(file, spec) if p.severity == "error"]
    if problems and any(p in found for p in problems):
        return problems  # an unresolved or unfitting context is not rendered (as in a build)
    try:
        render_chart(spec, file)
    except MarkerLeftover:
        pass  # the spec's guards named the field that holds it
    except ProblemsError as exc:
        problems += exc.problems
    return problems
