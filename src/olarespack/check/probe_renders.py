"""The renders lint asks beyond an install's, as Olares' own linter makes them (olares/probes.py and
olares/scale.py judge them): the multiple-install probes (other release names, other owners) and the
scale-to-zero renders (every declared workload's replicaCount at 0, then 1), each one helm call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from olarespack.check.inputs import Target
from olarespack.check.render import DocumentCache, render_values
from olarespack.core.errors import Problem
from olarespack.helm import Helm, HelmResult, values_file
from olarespack.olares import probes, scale
from olarespack.olares.versions import render_modes


@dataclass(frozen=True)
class HelmCall:
    """One helm invocation (run) and what olarespack makes of its output (analyse), kept apart so the
    benchmark can time the bare invocations a lint needs."""

    run: Callable[[], Any]
    analyse: Callable[[Any], list[Problem]]


def probe_call(helm: Helm, target: Target, parse: DocumentCache) -> HelmCall:
    """Olares' multiple-install probes: two release names, then two owners only when a cluster-scoped name
    stayed fixed (and only the first render when it shows nothing a second one could reveal)."""
    chart = target.chart
    namespace = f"{chart.name}-alice"
    values = render_values(chart, render_modes(chart.manifest)[0])

    def render(release: str, owner: str | None = None) -> HelmResult:
        with values_file({**values, "bfl": {**values["bfl"], "username": owner}} if owner else values) as path:
            return helm.template(target.folder, release, namespace, path)

    def parsed(result: HelmResult) -> probes.Documents | None:
        try:
            return parse.split(result.stdout) if result.ok else None
        except yaml.YAMLError:
            return None

    def run() -> dict[str, tuple[HelmResult, probes.Documents | None]]:
        first, second = probes.PROBE_RELEASES
        out = {first: (result := render(first), documents := parsed(result))}
        if documents is None or not (probes.workload_check_applies(chart.manifest) or probes.cluster_scoped(documents)):
            return out
        out[second] = (result := render(second), other := parsed(result))
        if other is not None and probes.needs_owner_probes(chart.manifest, documents, other):
            out |= {
                owner: (result := render(probes.USER_PROBE_RELEASE, owner), parsed(result))
                for owner in probes.USER_PROBES
            }
        return out

    def analyse(results: dict[str, tuple[HelmResult, probes.Documents | None]]) -> list[Problem]:
        renders: dict[str, probes.Documents] = {}
        for name, (result, documents) in results.items():
            if documents is None:
                detail = result.stderr.strip() if not result.ok else "the rendered YAML does not parse"
                return [
                    Problem(
                        chart.label,
                        "",
                        f"helm {helm.version} template (multiple-install probe {name!r}): {detail}",
                        "fix the template or the values it reads",
                        rule="helm-template",
                    )
                ]
            renders[name] = documents
        if probes.PROBE_RELEASES[1] not in renders:
            return []  # nothing cluster-scoped and no workload gate: nothing a second render could show
        return probes.probe_problems(chart, renders)

    return HelmCall(run, analyse)


def scale_call(helm: Helm, target: Target, parse: DocumentCache) -> HelmCall:
    """Olares' scale-to-zero check: the chart rendered with every declared workload's replicaCount at 0, then 1."""
    chart = target.chart
    names = scale.declared_workloads(chart.manifest)
    values = render_values(chart, "")

    def run() -> dict[int, HelmResult]:
        out: dict[int, HelmResult] = {}
        for want in scale.SCALE_PROBES:
            with values_file(scale.scale_values(values, names, want)) as path:
                out[want] = helm.template(target.folder, chart.name, f"{chart.name}-alice", path)
        return out

    def analyse(results: dict[int, HelmResult]) -> list[Problem]:
        renders: dict[int, scale.Documents] = {}
        for want, result in results.items():
            try:
                renders[want] = parse.split(result.stdout) if result.ok else []
            except yaml.YAMLError:
                result = HelmResult(False, "", "the rendered YAML does not parse")
            if not result.ok:
                return [
                    Problem(
                        chart.label,
                        "",
                        f"helm {helm.version} template (replicaCount={want}): {result.stderr.strip()}",
                        "fix the template or the values it reads",
                        rule="helm-template",
                    )
                ]
        return scale.scale_problems(chart, renders)

    return HelmCall(run, analyse)
