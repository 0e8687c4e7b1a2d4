"""One helm render of a chart as Olares' linter reads it (olares/workloads.py and olares/workload_resources.py
check it): its documents with the templates they came from, and how a workload's pod and containers are found."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem
from olarespack.olares.findings import as_list, as_map

WORKLOADS = frozenset({"Deployment", "StatefulSet"})
POD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"})
GPU_INJECT = "applications.app.bytetrade.io/gpu-inject"
FORBIDDEN_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection", "*"})
FORBIDDEN_RESOURCES = frozenset({"nodes", "networkpolicies", "*"})
Document = tuple[str, dict[str, Any], str]  # (template path, document, its text)


@dataclass(frozen=True)
class Rendered:
    """The manifests helm rendered for one accelerator mode, each with the template it came from."""

    mode: str
    namespace: str
    documents: list[Document]


def name_of(document: dict[str, Any]) -> str:
    return str(as_map(document.get("metadata")).get("name"))


def pod_path(document: dict[str, Any]) -> str:
    kind = document.get("kind")
    return (
        "spec"
        if kind == "Pod"
        else ("spec.jobTemplate.spec.template.spec" if kind == "CronJob" else "spec.template.spec")
    )


def pod_spec(document: dict[str, Any]) -> dict[str, Any]:
    found: Any = document
    for part in pod_path(document).split("."):
        found = as_map(found).get(part)
    return as_map(found)


def containers(document: dict[str, Any], init: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path, container) of a workload's pod, init containers first."""
    pod = pod_spec(document)
    groups = ("initContainers", "containers") if init else ("containers",)
    for group in groups:
        for i, container in enumerate(as_list(pod.get(group))):
            yield f"{pod_path(document)}.{group}[{i}]", as_map(container)


class Out:
    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        self.found: list[Problem] = []

    def add(self, source: str, field: str, message: str, fix: str, rule: str, severity: str = "error") -> None:
        self.found.append(
            Problem(
                self.chart.where(source),
                field,
                message,
                fix,
                rule=rule,
                severity="warning" if severity == "warning" else "error",
            )
        )
