"""The checks of a rendered app that need no tool: what its engine would refuse (engine rules) and what
Olares would refuse in its chart's files (the manifest rules). Build and lint both run exactly this, once
per app: spec-level findings once, chart-level findings once per generation rendered."""

from __future__ import annotations

from olarespack.chart import Chart
from olarespack.engines import engine_problems
from olarespack.errors import Problem
from olarespack.olares.chartfiles import chart_problems
from olarespack.spec.models import AppSpec


def check_app(file: str, spec: AppSpec, charts: list[Chart]) -> list[Problem]:
    return engine_problems(file, spec) + [problem for chart in charts for problem in chart_problems(chart)]
