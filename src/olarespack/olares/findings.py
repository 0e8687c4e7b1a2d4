"""What the manifest rules share: a manifest's loosely typed YAML read safely, and the problems found on
one manifest, all reported on OlaresManifest.yaml."""

from __future__ import annotations

from typing import Any

from olarespack.core.chart import MANIFEST, Chart
from olarespack.core.errors import Problem, Severity


def as_map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return "" if value is None else str(value).strip()


class Findings:
    """Problems about one manifest, all reported on OlaresManifest.yaml."""

    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        self.found: list[Problem] = []

    def add(self, path: str, message: str, fix: str, rule: str, severity: Severity = "error") -> None:
        self.found.append(Problem(self.chart.where(MANIFEST), path, message, fix, rule=rule, severity=severity))
