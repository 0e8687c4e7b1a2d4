"""Olares' resource rules on a render (oac internal/resources/limits.go): the containers' requests and limits
against the manifest's requirement per accelerator mode, and olarespack's own advice about the GPU memory HAMi
gives a workload, marked as such."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from olarespack.core import quantity
from olarespack.core.chart import MANIFEST
from olarespack.olares.findings import as_list, as_map
from olarespack.olares.rendered import GPU_INJECT, WORKLOADS, Document, Out, containers, name_of
from olarespack.olares.versions import api_version, is_legacy, is_modern


def _requirement(manifest: dict[str, Any], mode: str) -> dict[str, Any] | None:
    """The requirement fields Olares compares a render with, or None when it compares nothing (v2, or a
    0.12.0 manifest without spec.accelerator)."""
    spec = as_map(manifest.get("spec"))
    if api_version(manifest) == "v2":
        return None
    if is_legacy(manifest):
        return spec
    accelerator = [as_map(e) for e in as_list(spec.get("accelerator"))]
    if is_modern(manifest) and not accelerator:
        return None
    return next((e for e in accelerator if str(e.get("mode")) == mode), None)


def resource_limits(out: Out, manifest: dict[str, Any], documents: list[Document], mode: str) -> None:
    """checkResourceLimits / CheckResourceLimits: every main container of a workload sets cpu and memory
    requests and limits, and their sums fit the manifest's requirement for this mode. Where oac compares
    nothing (apiVersion v2, or a 0.12.0 manifest without accelerator[]), the same findings are olarespack's
    advice: Olares admits the app by what the manifest declares, Kubernetes schedules the pod by its requests."""
    mirrored = _requirement(manifest, mode)
    fields = mirrored if mirrored is not None else as_map(manifest.get("spec"))
    severity = "error" if mirrored is not None else "warning"
    advice = "" if mirrored is not None else "; Olares does not compare these for this manifest, so this is advice"
    sums = {
        "requests.cpu": Fraction(0),
        "requests.memory": Fraction(0),
        "limits.cpu": Fraction(0),
        "limits.memory": Fraction(0),
    }
    for source, document, _ in documents:
        if document.get("kind") not in WORKLOADS:
            continue
        for at, container in containers(document, init=False):
            where = f"{document.get('kind')}/{name_of(document)}.{at}.resources"
            resources = as_map(container.get("resources"))
            amounts: dict[str, Fraction] = {}
            for side in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    raw = as_map(resources.get(side)).get(resource)
                    try:
                        amount = quantity.parse_quantity(str(raw)) if raw is not None else Fraction(0)
                    except ValueError as exc:
                        out.add(
                            source,
                            f"{where}.{side}.{resource}",
                            str(exc),
                            "write a quantity",
                            "olares-container-resources",
                            severity,
                        )
                        amount = Fraction(0)
                    if amount == 0:
                        out.add(
                            source,
                            where,
                            f"must set {resource} {side[:-1]}{advice}",
                            f"set {side}.{resource}",
                            "olares-container-resources",
                            severity,
                        )
                    amounts[f"{side}.{resource}"] = amount
                    sums[f"{side}.{resource}"] += amount
            for resource in ("cpu", "memory"):
                if amounts[f"limits.{resource}"] and amounts[f"requests.{resource}"] > amounts[f"limits.{resource}"]:
                    out.add(
                        source,
                        f"{where}.requests.{resource}",
                        f"requests.{resource} must be <= limits.{resource}{advice}",
                        "lower the request or raise the limit",
                        "olares-container-resources",
                        severity,
                    )
    for total, declared in (
        ("limits.cpu", "limitedCpu"),
        ("limits.memory", "limitedMemory"),
        ("requests.cpu", "requiredCpu"),
        ("requests.memory", "requiredMemory"),
    ):
        raw = str(fields.get(declared) or "").strip()
        if not raw or raw == "-1":
            continue
        try:
            allowed = quantity.parse_quantity(raw)
        except ValueError:
            allowed = Fraction(0)
        if sums[total] > allowed:
            shown = (
                quantity.format_cpu(int(sums[total] * 1000))
                if "cpu" in total
                else quantity.format_bytes(int(sums[total]))
            )
            out.add(
                MANIFEST,
                f"{_path(manifest, mode)}.{declared}",
                f"sum of container resources.{total} ({shown}, mode {mode or 'default'}) must be <= {declared} "
                f"({raw}){advice}",
                f"declare at least {shown} or lower the containers' resources",
                "olares-resource-sums",
                severity,
            )


def _path(manifest: dict[str, Any], mode: str) -> str:
    accelerator = as_list(as_map(manifest.get("spec")).get("accelerator"))
    for i, entry in enumerate(accelerator):
        if str(as_map(entry).get("mode")) == mode:
            return f"spec.accelerator[{i}]"
    return "spec"


def _injected(document: dict[str, Any], name: str) -> bool:
    value = str(as_map(as_map(document.get("metadata")).get("annotations")).get(GPU_INJECT, ""))
    return value == "true" or name in {part.strip() for part in value.split(",")}


def gpu_memory(out: Out, manifest: dict[str, Any], source: str, document: dict[str, Any], mode: str) -> None:
    """olarespack's advice, from HAMi and Olares' GPU webhook (app-service webhook.go addGpuResourceLimits):
    HAMi reads nvidia.com/gpumem as bare MiB, and the webhook sets the limit of an injected container to
    requiredGPUMemory in MiB; a request that differs makes Kubernetes refuse the pod (extended resources need
    requests equal to limits)."""
    fields = _requirement(manifest, mode) or {}
    required = fields.get("requiredGPUMemory") if mode == "nvidia" else None
    try:
        booked = quantity.mib(quantity.parse_bytes(str(required))) if required not in (None, "", "-1") else None
    except ValueError:
        booked = None
    for at, container in containers(document):
        resources = as_map(container.get("resources"))
        where = f"{document.get('kind')}/{name_of(document)}.{at}.resources"
        for side in ("requests", "limits"):
            value = as_map(resources.get(side)).get("nvidia.com/gpumem")
            if value is not None and not str(value).isdigit():
                out.add(
                    source,
                    f"{where}.{side}.nvidia.com/gpumem",
                    f"{value!r}: HAMi reads a bare integer of MiB and misreads unit suffixes",
                    "write the MiB as a bare integer, e.g. 23552",
                    "gpumem-bare-mib",
                )
        request = as_map(resources.get("requests")).get("nvidia.com/gpumem")
        if (
            booked is not None
            and request is not None
            and str(request).isdigit()
            and _injected(document, str(container.get("name")))
            and int(str(request)) != booked
        ):
            out.add(
                source,
                f"{where}.requests.nvidia.com/gpumem",
                f"{request} MiB, but Olares sets the limit to "
                f"requiredGPUMemory ({required} = {booked} MiB): Kubernetes refuses a pod whose GPU memory request "
                "differs from its limit",
                f"request {booked}",
                "gpu-memory-request",
            )
