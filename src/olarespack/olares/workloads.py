"""Olares' rules on the manifests helm rendered for one accelerator mode (the checks olares-cli runs after
rendering a chart with Olares' values): the Deployment named after the app, namespaces, hostPath with
Recreate, container resources and their sums against the manifest, GPU memory as HAMi reads it, no token
outside a Secret, no root for images not from beclab."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from olarespack import quantity
from olarespack.chart import Chart
from olarespack.errors import Problem
from olarespack.olares.rules import CLUSTER_SCOPED, WORKLOAD_KINDS, _problem, accelerator_modes


@dataclass(frozen=True)
class Rendered:
    """The manifests helm rendered for one accelerator mode, each with the template it came from."""

    mode: str
    namespace: str
    documents: list[tuple[str, dict[str, Any], str]]  # (template path, document, its text)


def _containers(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    pod = ((document.get("spec") or {}).get("template") or {}).get("spec") or {}
    return ([(f"spec.template.spec.initContainers[{i}]", c) for i, c in enumerate(pod.get("initContainers") or [])]
            + [(f"spec.template.spec.containers[{i}]", c) for i, c in enumerate(pod.get("containers") or [])])


def rendered_problems(chart: Chart, rendered: Rendered, secret_sentinel: str | None) -> list[Problem]:
    manifest = chart.manifest
    problems: list[Problem] = []
    app = str((manifest.get("metadata") or {}).get("name", chart.name))
    deployments = {d["metadata"].get("name") for _, d, _ in rendered.documents if d.get("kind") == "Deployment"}
    if app not in deployments:
        problems.append(_problem(chart, "templates", "Deployment", f"no Deployment named {app!r} ({rendered.mode})",
                                 "name the main Deployment after the app", "olares-deployment"))
    workloads = {d["metadata"].get("name") for _, d, _ in rendered.documents if d.get("kind") in WORKLOAD_KINDS}
    for name in manifest.get("workloadReplicas") or {}:
        if name not in workloads:
            problems.append(_problem(chart, "OlaresManifest.yaml", f"workloadReplicas.{name}", "no such Deployment "
                                     "or StatefulSet in the chart", "list the chart's workloads",
                                     "olares-workload-replicas"))
    sums: dict[str, list[int]] = {}  # "<init|app>:<resource>_<request|limit>" -> each container's amount
    for source, document, text in rendered.documents:
        kind = str(document.get("kind"))
        name = str((document.get("metadata") or {}).get("name"))
        if kind not in CLUSTER_SCOPED and (document.get("metadata") or {}).get("namespace") != rendered.namespace:
            problems.append(_problem(chart, source, f"{kind}/{name}.metadata.namespace", "not the release namespace",
                                     'set namespace: "{{ .Release.Namespace }}"', "olares-namespace"))
        if kind in WORKLOAD_KINDS:
            problems += _workload_problems(chart, source, document, sums)
        if secret_sentinel and kind != "Secret" and secret_sentinel in text:
            problems.append(_problem(chart, source, f"{kind}/{name}", "the Hugging Face token appears outside a "
                                     "Secret", "put it in a Secret and reference it with secretKeyRef",
                                     "secret-outside-secret"))
    for mode, fields, at in accelerator_modes(manifest):
        if mode != rendered.mode:
            continue
        for key, manifest_field, parse in (("cpu_request", "requiredCpu", quantity.parse_cpu),
                                           ("cpu_limit", "limitedCpu", quantity.parse_cpu),
                                           ("memory_request", "requiredMemory", quantity.parse_bytes),
                                           ("memory_limit", "limitedMemory", quantity.parse_bytes)):
            declared = fields.get(manifest_field)
            try:
                limit = parse(str(declared)) if declared is not None else None
            except ValueError:
                continue
            needed = quantity.pod_effective(sums.get(f"app:{key}", []), sums.get(f"init:{key}", []))
            if limit is not None and needed > limit:
                shown = quantity.format_cpu(needed) if "cpu" in key else quantity.format_bytes(needed)
                problems.append(_problem(chart, "OlaresManifest.yaml", f"{at}.{manifest_field}",
                                         f"the pod's {key.replace('_', ' ')} is {shown} (as Kubernetes "
                                         f"counts it), above the declared {declared}",
                                         f"declare at least {shown} or lower the containers' resources",
                                         "olares-resource-sums"))
    return problems


def _workload_problems(chart: Chart, source: str, document: dict[str, Any],
                       sums: dict[str, list[int]]) -> list[Problem]:
    problems: list[Problem] = []
    name = document["metadata"].get("name")
    pod = ((document.get("spec") or {}).get("template") or {}).get("spec") or {}
    if any("hostPath" in (v or {}) for v in pod.get("volumes") or []) and document.get("kind") == "Deployment" \
            and ((document.get("spec") or {}).get("strategy") or {}).get("type") != "Recreate":
        problems.append(_problem(chart, source, f"Deployment/{name}.spec.strategy", "hostPath volumes need "
                                 "strategy Recreate", "set strategy: {type: Recreate}", "olares-hostpath-recreate"))
    for at, container in _containers(document):
        where = f"{document['kind']}/{name}.{at}"
        group = "init" if ".initContainers[" in at else "app"
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource, parse in (("cpu", quantity.parse_cpu), ("memory", quantity.parse_bytes)):
            if group == "init" and resource not in requests and resource not in limits:
                continue  # Olares requires resources on app containers only
            if resource not in requests or resource not in limits:
                problems.append(_problem(chart, source, f"{where}.resources", f"{resource} request and limit are "
                                         "both required", f"set resources.requests.{resource} and "
                                         f"resources.limits.{resource}", "olares-container-resources"))
                continue
            try:
                request, limit = parse(str(requests[resource])), parse(str(limits[resource]))
            except ValueError as exc:
                problems.append(_problem(chart, source, f"{where}.resources", str(exc), "write a quantity",
                                         "olares-container-resources"))
                continue
            if request > limit:
                problems.append(_problem(chart, source, f"{where}.resources.requests.{resource}", "above the "
                                         "limit", "lower the request or raise the limit", "olares-container-resources"))
            sums.setdefault(f"{group}:{resource}_request", []).append(request)
            sums.setdefault(f"{group}:{resource}_limit", []).append(limit)
        for key in ("nvidia.com/gpumem",):
            for side, values in (("requests", requests), ("limits", limits)):
                if key in values and not re.fullmatch(r"\d+", str(values[key])):
                    problems.append(_problem(chart, source, f"{where}.resources.{side}.{key}", f"{values[key]!r}: "
                                             "HAMi reads a bare integer of MiB and misreads unit suffixes",
                                             "write the MiB as a bare integer, e.g. 24400", "gpumem-bare-mib"))
        image = str(container.get("image", ""))
        security = container.get("securityContext") or {}
        pod_security = pod.get("securityContext") or {}
        if not image.startswith(("beclab/", "docker.io/beclab/")) and (
                security.get("privileged") or security.get("runAsUser") == 0 or pod_security.get("runAsUser") == 0):
            problems.append(_problem(chart, source, f"{where}.securityContext", f"{image} runs privileged or as "
                                     "root", "drop privileged and runAsUser: 0", "olares-privileged"))
    return problems
