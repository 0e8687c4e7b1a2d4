"""Olares as it is now: what the Market's bot merges although the stored oac (or olarespack) refused it, and
the rules current oac has. Hand-written charts shaped like the official ones, linted as `olarespack lint PATH`."""

from __future__ import annotations

from pathlib import Path

import pytest

from olarespack.check.lint import lint
from olarespack.core.errors import Problem
from olarespack.helm import HelmBinary
from test_oac_cases import (
    ACCELERATOR,
    REPLICA_FIELD,
    REPLICA_VALUES,
    REPLICAS,
    SMALL,
    accelerator_entry,
    chart,
    deployment,
    manifest,
)

pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def helms() -> list[HelmBinary]:
    return [HelmBinary(name="helm")]


def app(tmp_path: Path, name: str, resources: str = ACCELERATOR, template: str | None = None, top: str = "",
        spec: str = "") -> Path:
    text = template or deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name))
    return chart(tmp_path, name, manifest(name, version="0.12.0", api="v3", resources=resources, spec=spec,
                                          top=REPLICAS.format(name=name) + top),
                 {"deployment.yaml": text}, values=REPLICA_VALUES.format(name=name))


def found(folder: Path, helms: list[HelmBinary], rule: str) -> list[Problem]:
    return [p for p in lint([str(folder)], helms).problems if p.rule == rule]


@pytest.mark.parametrize("mode", ["intel", "amd", "moore-soc"])
def test_a_platform_mode_the_market_passes_is_a_warning(tmp_path: Path, helms: list[HelmBinary], mode: str) -> None:
    # embeddinggemmav3 declares mode intel and the Market's bot merged it three times (beclab/apps #2987, #3084,
    # #3660): oac's ValidateResourceMode does not list it, so a warning that says both
    folder = app(tmp_path, "intelish", resources=accelerator_entry(mode))
    report = lint([str(folder)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = [p for p in report.problems if p.rule == "olares-accelerator"]
    assert (hit.path, hit.severity) == ("spec.accelerator[0].mode", "warning")
    assert "#3432" in hit.message and "#2987, #3084, #3660" in hit.message


def test_a_statefulset_with_a_strategy_is_a_warning(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # bytebase (beclab/apps #3328): a StatefulSet takes updateStrategy; the API server drops the unknown
    # `strategy` with a warning by default (field validation Warn, KEP-2885), so the chart installs
    name = "stateful"
    text = deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name)).replace(
        "kind: Deployment", "kind: StatefulSet").replace("  strategy:\n", "  serviceName: web\n  strategy:\n", 1)
    folder = app(tmp_path, name, template=text.replace("hostPath:\n            type: DirectoryOrCreate\n            "
                                                       "path:", "emptyDir: {}\n          # path:"))
    report = lint([str(folder)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = found(folder, helms, "kube-schema")
    assert (hit.path, hit.severity) == (f"StatefulSet/{name}.spec", "warning") and "'strategy'" in hit.message
    assert "KEP-2885" in hit.message
    # a value of the wrong type is still refused: the API server answers 400
    broken = app(tmp_path / "b", name, template=text.replace("serviceName: web", "serviceName: [web]"))
    assert [(p.path, p.severity) for p in found(broken, helms, "kube-schema") if p.severity == "error"] == [
        (f"StatefulSet/{name}.spec.serviceName", "error")]


def test_a_hand_written_charts_gpu_memory_limit_above_its_request_is_a_warning(tmp_path: Path,
                                                                              helms: list[HelmBinary]) -> None:
    # embeddinggemmav3 merged with requiredGPUMemory 2048Mi and limitedGPUMemory 4096Mi: oac only wants
    # limited >= required; Olares limits the pod to requiredGPUMemory, so the rest is never given
    entry = accelerator_entry("nvidia").replace("mode: nvidia\n", "mode: nvidia\n      requiredGPUMemory: 2048Mi\n"
                                                "      limitedGPUMemory: 4096Mi\n")
    folder = app(tmp_path, "gpulimit", resources=entry)
    report = lint([str(folder)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = [p for p in report.problems if p.rule == "olares-gpu-limit"]
    assert (hit.path, hit.severity) == ("spec.accelerator[0].limitedGPUMemory", "warning")


def test_memory_below_the_gpu_memory_is_a_warning_naming_the_olares_change(tmp_path: Path,
                                                                          helms: list[HelmBinary]) -> None:
    entry = accelerator_entry("nvidia", gpu="8Gi")  # requiredMemory 128Mi
    report = lint([str(app(tmp_path, "gpumem", resources=entry))], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = [p for p in report.problems if p.rule == "olares-memory-covers-gpu"]
    assert (hit.path, hit.severity) == ("spec.accelerator[0].requiredMemory", "warning")
    assert "128Mi is below requiredGPUMemory (8Gi)" in hit.message and "#3996" in hit.message
    assert "at least 8Gi" in hit.fix
    covered = accelerator_entry("nvidia", gpu="8Gi").replace("requiredMemory: 128Mi", "requiredMemory: 8Gi") \
        .replace("limitedMemory: 256Mi", "limitedMemory: 8Gi")
    assert found(app(tmp_path / "covered", "gpumemok", resources=covered), helms, "olares-memory-covers-gpu") == []
    auto = accelerator_entry("nvidia", gpu="8Gi").replace("requiredMemory: 128Mi", "requiredMemory: \"-1\"")
    assert found(app(tmp_path / "auto", "gpumemauto", resources=auto), helms, "olares-memory-covers-gpu") == []


def test_the_replicas_rule_says_it_is_oacs_and_since_when(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # grafana and gitlab merged before oac refused a workload whose replicas do not follow replicaCount: still
    # an error (Olares cannot stop the app), which says whose rule it is and since which change
    name = "pinned"
    folder = app(tmp_path, name, template=deployment(name, resources=SMALL).replace("  replicas: 1\n", ""))
    hits = found(folder, helms, "olares-workload-replicas")
    assert hits and all(p.severity == "error" for p in hits)
    assert all("CheckWorkloadReplicasRendered" in p.message and "beclab/Olares #4040" in p.message for p in hits)
