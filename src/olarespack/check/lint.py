"""`olarespack lint`: every input through the pure layers (spec, engine flags, Olares' rules on the chart
files; project.check_app, the same run as a build), then helm: `helm lint --strict` with Helm 3 and Helm 4,
`helm template` with Olares' values for every accelerator mode, Olares' rules on the rendered workloads and
the Kubernetes schemas. The helm calls run in parallel: their process start-up is most of a lint's time,
so several charts share one `helm lint`.

Specs are rendered for both manifest generations (the market serves either); `lint_apps` takes apps
already rendered (publish renders each app once and lints exactly that).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from olarespack.check import kube
from olarespack.check.inputs import Target, classify
from olarespack.check.probe_renders import HelmCall, probe_call, scale_call
from olarespack.check.render import SECRET_SENTINEL, DocumentCache, entrance_names, render_values
from olarespack.core.chart import MANIFEST, Chart
from olarespack.core.errors import Problem
from olarespack.helm import Helm, HelmResult, values_file
from olarespack.olares import legacy, probes, scale
from olarespack.olares.chartfiles import chart_problems
from olarespack.olares.generations import GENERATION_NAMES
from olarespack.olares.rendered import Rendered
from olarespack.olares.values import OAC_ADMIN, OAC_OWNER, oac_values
from olarespack.olares.versions import api_version, render_modes
from olarespack.olares.workloads import rendered_problems
from olarespack.project import App, load_apps
from olarespack.write import write_files

LINT_BATCH = 16
# The helm binaries, or a function giving them: asked only when some chart reaches the helm layer, so a
# lint whose inputs all fail the pure layers needs no helm at all.
Helms = Sequence[Helm] | Callable[[], Sequence[Helm]]


@dataclass
class LintReport:
    problems: list[Problem] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # labels of the specs and charts checked
    spec_names: list[str] = field(default_factory=list)  # app names of the specs that loaded

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


# --------------------------------------------------------------------------- helm


def _lint_batches(targets: list[Target]) -> Iterator[tuple[list[Target], dict[str, Any]]]:
    """Charts whose values agree (domains aside) share one helm lint process."""
    groups: dict[str, list[Target]] = {}
    for target in targets:
        values = render_values(target.chart, render_modes(target.chart.manifest)[0])
        values.pop("domain")
        values["userspace"] = {}
        groups.setdefault(json.dumps(values, sort_keys=True), []).append(target)
    for group in groups.values():
        for start in range(0, len(group), LINT_BATCH):
            batch = group[start : start + LINT_BATCH]
            values = render_values(batch[0].chart, render_modes(batch[0].chart.manifest)[0])
            values["domain"] = {k: v for t in batch for k, v in render_values(t.chart, "")["domain"].items()}
            yield batch, values


def _lint_call(helm: Helm, batch: list[Target], values: dict[str, Any]) -> HelmCall:
    def run() -> dict[Path, list[str]]:
        with values_file(values) as path:
            return helm.lint_many([t.folder for t in batch], path)

    def analyse(findings: dict[Path, list[str]]) -> list[Problem]:
        return [
            Problem(
                target.chart.label,
                "",
                f"helm {helm.version}: {line}",
                "fix the template or the values it reads",
                rule="helm-lint",
                severity="warning",
            )
            for target in batch
            for line in findings[target.folder]
        ]

    return HelmCall(run, analyse)


def _template_call(helm: Helm, target: Target, mode: str, parse: DocumentCache) -> HelmCall:
    chart = target.chart
    namespace = f"{chart.name}-alice"

    def run() -> HelmResult:
        with values_file(render_values(chart, mode)) as path:
            return helm.template(target.folder, chart.name, namespace, path)

    def analyse(out: HelmResult) -> list[Problem]:
        if not out.ok:
            return [
                Problem(
                    chart.label,
                    "",
                    f"helm {helm.version} template ({mode or 'no GPU type'}): {out.stderr.strip()}",
                    "fix the template or the values it reads",
                    rule="helm-template",
                )
            ]
        try:
            documents = parse.split(out.stdout)
        except yaml.YAMLError as exc:
            return [
                Problem(
                    chart.label,
                    "",
                    f"rendered YAML does not parse ({mode or 'no GPU type'}): {exc}",
                    "fix the template",
                    rule="helm-template",
                )
            ]
        problems = rendered_problems(chart, Rendered(mode, namespace, documents), SECRET_SENTINEL)
        for source, document, _ in documents:
            name = f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"
            problems += [_schema_problem(chart.where(source), name, error) for error in kube.schema_findings(document)]
        return problems

    return HelmCall(run, analyse)


def _oac_call(helm: Helm, target: Target) -> HelmCall:
    """The render `olares-cli chart lint` runs before its structural checks: oac's own sparse values, owner !=
    admin, no GPU type, the app's name as the release, namespace app-namespace (chart.go Lint). A template that
    renders for an install but not there is refused by Olares' linter, and by the Market's."""
    chart = target.chart
    values = oac_values(entrance_names(chart.manifest), api_version(chart.manifest))

    def run() -> HelmResult:
        with values_file(values) as path:
            return helm.template(target.folder, chart.name, "app-namespace", path)

    def analyse(out: HelmResult) -> list[Problem]:
        if out.ok:
            return []
        return [
            Problem(
                chart.label,
                "",
                f"helm {helm.version} template with the values `olares-cli chart lint` "
                f"gives (owner {OAC_OWNER!r}, admin {OAC_ADMIN!r}, no GPU type, no olaresEnv values): "
                f"{out.stderr.strip()[:2000]}",
                "make the template render with only those values (guard what "
                "an install alone gives with `if`, `default` or `dig`)",
                rule="helm-template",
            )
        ]

    return HelmCall(run, analyse)


def _schema_problem(file: str, name: str, error: kube.SchemaError) -> Problem:
    if error.unknown:
        return Problem(
            file,
            f"{name}.{error.path}",
            f"Kubernetes {kube.KUBERNETES_VERSION} schema: {error.message}: "
            "the API server drops an unknown field with a warning (field validation Warn by default, "
            "KEP-2885), so it has no effect",
            "remove the field, or fix its name",
            rule="kube-schema",
            severity="warning",
        )
    return Problem(
        file,
        f"{name}.{error.path}",
        f"Kubernetes {kube.KUBERNETES_VERSION} schema: {error.message}",
        "fix the field's type or name",
        rule="kube-schema",
    )


def helm_calls(targets: list[Target], helms: Sequence[Helm]) -> list[HelmCall]:
    """Every chart through `helm lint --strict` with each helm (batched), then `helm template` with the
    first (Helm 3, what Olares embeds) for each accelerator mode, for the Olares and schema rules, and under
    the release names and owners of Olares' multiple-install probes where they apply."""
    calls = [_lint_call(helm, batch, values) for helm in helms for batch, values in _lint_batches(targets)]
    if helms:
        parse = DocumentCache()
        calls += [
            _template_call(helms[0], target, mode, parse)
            for target in targets
            for mode in render_modes(target.chart.manifest)
        ]
        calls += [_oac_call(helms[0], target) for target in targets]
        calls += [
            probe_call(helms[0], target, parse) for target in targets if probes.probes_apply(target.chart.manifest)
        ]
        calls += [
            scale_call(helms[0], target, parse) for target in targets if scale.declared_workloads(target.chart.manifest)
        ]
    return calls


# --------------------------------------------------------------------------- entry points


def _app_targets(apps: list[App], stack: ExitStack) -> list[Target]:
    """The rendered charts on disk (helm reads folders), labelled `<spec> [<generation>]`."""
    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="olarespack-lint-")))
    targets: list[Target] = []
    for app in apps:
        for generation, chart in app.charts.items():
            folder = root / generation / f"{len(targets)}" / app.spec.name
            write_files(chart, folder)
            targets.append(Target(chart, folder))
    return targets


def _run(targets: list[Target], helms: Helms, jobs: int, report: LintReport, pure: Sequence[Chart] = ()) -> LintReport:
    """The helm layers of the targets, and the pure rules of the charts in `pure` while the first helm
    processes run."""
    outcomes: list[tuple[HelmCall, Future[Any]]] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        if targets:
            calls = helm_calls(targets, helms() if callable(helms) else helms)
            outcomes = [(call, pool.submit(call.run)) for call in calls]
        for chart in pure:
            report.problems += chart_problems(chart)
        # The workers only run helm; its output is read here meanwhile, so no helm slot waits on Python.
        for call, outcome in outcomes:
            report.problems += call.analyse(outcome.result())
    # a chart rendered for two accelerator modes shows a mode-independent finding twice: once is enough
    report.problems = sorted(dict.fromkeys(report.problems))
    return report


def lint_apps(apps: list[App], helms: Helms, jobs: int = 2) -> LintReport:
    """The helm layers of apps rendered and checked already (their pure problems are their warnings)."""
    report = LintReport(
        problems=[w for app in apps for w in app.warnings],
        checked=[app.file for app in apps],
        spec_names=[app.spec.name for app in apps],
    )
    with ExitStack() as stack:
        return _run(_app_targets(apps, stack), helms, jobs, report)


def _legacy_manifests(target: Target, helms: Helms, stack: ExitStack) -> tuple[Target, list[Chart], list[Problem]]:
    """A templated legacy manifest rendered by helm as Olares renders it, once per install it validates: the
    target with the first render, the chart under each render (for the pure rules), or helm's refusal."""
    chart, helm = target.chart, (helms() if callable(helms) else helms)[0]
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="olarespack-manifest-"))) / "chart"
    write_files(legacy.manifest_chart(chart), folder)
    renders: list[Chart] = []
    for owner, admin in legacy.SCENARIOS:
        with values_file(legacy.manifest_values(owner, admin)) as path:
            result = helm.template(folder, "chart", "default", path)
        if not result.ok:
            return (
                target,
                [chart],
                [
                    Problem(
                        chart.where(MANIFEST),
                        "",
                        f"does not render as a template (owner {owner}, admin {admin}): {result.stderr.strip()}",
                        "fix the template syntax",
                        rule="olares-files",
                    )
                ],
            )
        renders.append(legacy.with_manifest(chart, legacy.rendered_text(result.stdout)))
    return Target(renders[0], target.folder), renders, []


def collect(
    paths: list[str], stack: ExitStack, report: LintReport, helms: Helms = (), deferred: list[Chart] | None = None
) -> list[Target]:
    """Every input through the pure layers (problems into the report); the charts helm can render. With
    helms, a legacy manifest written as a template is rendered first, as Olares reads it. With `deferred`,
    the charts' own files are put there to check later (lint checks them while helm starts) instead."""
    specs, charts, refused = classify(paths, stack)
    report.problems += refused
    report.checked += [p.file for p in refused]
    apps, problems = load_apps(specs, GENERATION_NAMES)
    report.problems += problems + [w for app in apps for w in app.warnings]
    report.checked += [str(s) for s in specs]
    report.spec_names += [app.spec.name for app in apps]
    report.checked += [target.chart.label for target in charts]
    for i, target in enumerate(charts):
        views = [target.chart]
        if legacy.templated(target.chart) and (helms() if callable(helms) else helms):
            charts[i], views, refusal = _legacy_manifests(target, helms, stack)
            report.problems += refusal
        for chart in views:
            if deferred is None:
                report.problems += chart_problems(chart)
            else:
                deferred.append(chart)
    return _app_targets(apps, stack) + [t for t in charts if t.chart.manifest]


def lint(paths: list[str], helms: Helms, jobs: int = 2) -> LintReport:
    """Specs (both generations), chart folders, folders of charts and chart archives, every layer."""
    report = LintReport()
    deferred: list[Chart] = []
    with ExitStack() as stack:
        return _run(collect(paths, stack, report, helms, deferred), helms, jobs, report, deferred)
