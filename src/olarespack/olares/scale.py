"""Olares' scale-to-zero check (oac checkWorkloadScaleToZero, resources.CheckWorkloadReplicasRendered).

Olares stops and starts an app by upgrading its release with `.Values.workloads.<name>.replicaCount` set to
0 and back to 1; the first phase of an install renders it with 0 too. A chart whose `spec.replicas` does not
follow that value cannot be stopped: the upgrade changes nothing and the stop hangs until it times out.
`| default 1` looks right but turns the 0 into 1, and a workload without `spec.replicas` runs 1 pod
whatever the value. So, like oac, the chart is rendered with every declared workload's replicaCount forced
to 0 and then to 1, and every Deployment and StatefulSet must carry exactly that count (unset counts as 1,
as Kubernetes reads it). Pure: the renders in, Problems out."""

from __future__ import annotations

import json
from typing import Any

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem

SCALE_PROBES = (0, 1)
# oac refuses it since this change; charts the Market merged before it (grafana, gitlab) do not pass it yet
SINCE = (
    "oac's CheckWorkloadReplicasRendered, since beclab/Olares #4040 of 2026-08-27; charts merged before it "
    "may still carry this"
)
WORKLOADS = frozenset({"Deployment", "StatefulSet"})
Documents = list[tuple[str, dict[str, Any], str]]  # (template path, document, its text), as helm rendered them


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def declared_workloads(manifest: dict[str, Any]) -> list[str]:
    """The workloadReplicas names, sorted; none for apiVersion v2, which Olares scales without helm."""
    if str(manifest.get("apiVersion") or "").strip().lower() == "v2":
        return []
    return sorted(str(name) for name in _map(manifest.get("workloadReplicas")))


def scale_values(values: dict[str, Any], names: list[str], want: int) -> dict[str, Any]:
    """helmrender.SetWorkloadReplicas: the install values with each workload's replicaCount set to want."""
    scaled: dict[str, Any] = json.loads(json.dumps(values))  # install values are JSON; far quicker than deepcopy
    workloads = scaled.setdefault("workloads", {})
    if not isinstance(workloads, dict):
        workloads = scaled["workloads"] = {}
    for name in names:
        entry = workloads.setdefault(name, {})
        if not isinstance(entry, dict):
            entry = workloads[name] = {}
        entry["replicaCount"] = want
    return scaled


def _replicas(document: dict[str, Any]) -> tuple[int | None, str]:
    """(the count Kubernetes runs, how it reads in the message)."""
    spec = _map(document.get("spec"))
    if "replicas" not in spec or spec["replicas"] is None:
        return 1, "unset (Kubernetes defaults it to 1)"
    value = spec["replicas"]
    if isinstance(value, bool) or not isinstance(value, int):
        return None, repr(value)
    return value, str(value)


def scale_problems(chart: Chart, renders: dict[int, Documents]) -> list[Problem]:
    """CheckWorkloadReplicasRendered for each render: every Deployment and StatefulSet at the forced count."""
    problems: list[Problem] = []
    for want, documents in renders.items():
        for source, document, _ in documents:
            kind = str(document.get("kind"))
            if kind not in WORKLOADS:
                continue
            count, shown = _replicas(document)
            if count == want:
                continue
            name = str(_map(document.get("metadata")).get("name"))
            problems.append(
                Problem(
                    chart.where(source),
                    f"{kind}/{name}.spec.replicas",
                    f"rendered as {shown} while workloads.{name}.replicaCount was {want}: Olares starts and stops "
                    f"an app by setting that value, so it could not stop or start this workload ({SINCE})",
                    f"set spec.replicas: {{{{ .Values.workloads.{name}.replicaCount }}}} (no `default` or other "
                    "filter that turns 0 into another count)",
                    rule="olares-workload-replicas",
                )
            )
    return problems
