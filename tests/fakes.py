"""A stand-in for helm, for tests of the code around it (diff's resource matching, lint's reading of helm's
findings). It renders nothing the way helm does: each template is printed with its Go actions replaced by a
placeholder, lines holding only an action dropped; a workload's replicaCount is the one the values give (lint
renders each chart with it set, as Olares does). Integration tests use the real pinned binaries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from olarespack.helm import HelmResult

_ACTION_LINE = re.compile(r"^\s*\{\{-?[^}]*-?\}\}\s*$")
_ACTION = re.compile(r"\{\{-?\s*([^}]*?)\s*-?\}\}")
_REPLICAS = re.compile(r"\.Values\.workloads\.([A-Za-z0-9_-]+)\.replicaCount")


class FakeHelm:
    version = "v0.0.0-fake"

    def __init__(self, findings: dict[str, list[str]] | None = None, failing: set[str] | None = None) -> None:
        self.findings = findings or {}  # chart name -> lines helm lint would print
        self.failing = failing or set()  # chart names whose template fails
        self.calls: list[tuple[str, str]] = []  # (verb, chart name)

    def lint(self, chart: Path, values: Path) -> HelmResult:
        found = self.findings.get(chart.name, [])
        return HelmResult(not found, "\n".join(found), "")

    def lint_many(self, charts: list[Path], values: Path) -> dict[Path, list[str]]:
        self.calls += [("lint", chart.name) for chart in charts]
        return {chart: list(self.findings.get(chart.name, [])) for chart in charts}

    def template(self, chart: Path, release: str, namespace: str, values: Path) -> HelmResult:
        self.calls.append(("template", chart.name))
        if chart.name in self.failing:
            return HelmResult(False, "", f"Error: template: {chart.name}: fake failure")
        given = yaml.safe_load(values.read_text(encoding="utf-8")) or {}
        documents = []
        for path in sorted((chart / "templates").glob("*.yaml")):
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not _ACTION_LINE.match(line)]
            text = "\n".join(lines)
            text = text.replace("{{ .Release.Namespace }}", namespace)
            text = _ACTION.sub(lambda m: _action_value(m.group(1), given), text)
            documents.append(f"---\n# Source: {chart.name}/templates/{path.name}\n{text}\n")
        return HelmResult(True, "".join(documents), "")

    def package(self, chart: Path, destination: Path) -> HelmResult:
        return HelmResult(False, "", "the fake helm does not package")


def _action_value(action: str, values: dict[str, Any]) -> str:
    found = _REPLICAS.search(action)
    if not found:
        return "x"
    workload = (values.get("workloads") or {}).get(found.group(1)) or {}
    return str(workload.get("replicaCount", 1))
