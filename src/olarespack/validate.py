"""The rule engine behind `olarespack lint` (and, for its pure layers, every build).

Layers, in order: the spec (models and cross-field rules), engine flags, Olares' offline chart rules on the
rendered chart, then helm (lint --strict with Helm 3 and Helm 4, template with Olares' values for every
accelerator mode) and Kubernetes schemas on what helm rendered. Inputs may be specs, chart folders,
folders of charts, or packaged .tgz charts. The helm calls run in parallel: their process start-up is
most of a lint's time, so several charts share one `helm lint`.
"""

from __future__ import annotations

import functools
import json
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from olarespack import kube
from olarespack.errors import Problem, ProblemsError, UsageError
from olarespack.helm import Helm, HelmResult, install_values, values_file
from olarespack.project import duplicate_names, render_apps
from olarespack.render import GENERATIONS
from olarespack.rules_olares import (
    Chart,
    Rendered,
    accelerator_modes,
    manifest_problems,
    rendered_problems,
    split_rendered,
)
from olarespack.write import is_leftover, write_chart

SECRET_SENTINEL = "hf_olarespack_lint_sentinel_token"
LINT_BATCH = 16
# What lint reads of a chart (folder or archive): Helm's own loader refuses charts over 100 MiB unpacked and
# files over 5 MiB; a chart holds a few dozen files.
MAX_CHART_BYTES = 100 * 2**20
MAX_FILE_BYTES = 5 * 2**20
MAX_CHART_FILES = 2_000
MAX_ARCHIVE_BYTES = 20 * 2**20


@dataclass
class LintReport:
    problems: list[Problem] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # labels of the specs and charts checked
    spec_names: list[str] = field(default_factory=list)  # app names of the specs that loaded

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


class ChartInputError(Exception):
    """A chart lint refuses to read: too big, too many files, or links. Reported as that input's problem."""

    def __init__(self, label: str, message: str) -> None:
        super().__init__(message)
        self.problem = Problem(label, "", message, "lint the chart as Helm would load it: regular files, within "
                               "Helm's size limits", rule="chart-input")


def read_chart(folder: Path, label: str) -> Chart:
    """The chart's files as text, within Helm's size limits; symbolic links are refused, so a stranger's
    chart cannot make lint (and helm) read another file of the machine."""
    files: dict[str, str] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            raise ChartInputError(label, f"{relative} is a symbolic link; charts must hold regular files")
        if not path.is_file():
            continue
        size = path.stat().st_size
        total += size
        if len(files) >= MAX_CHART_FILES or size > MAX_FILE_BYTES or total > MAX_CHART_BYTES:
            raise ChartInputError(label, f"larger than a chart may be ({MAX_CHART_FILES} files, "
                                 f"{MAX_FILE_BYTES // 2**20} MiB a file, {MAX_CHART_BYTES // 2**20} MiB in all)")
        files[relative] = path.read_bytes().decode("utf-8", errors="replace")
    return Chart(label=label, name=folder.name, files=files)


# --------------------------------------------------------------------------- inputs


@dataclass
class Target:
    chart: Chart
    folder: Path


def _classify(paths: list[str], stack: ExitStack, report: LintReport) -> tuple[list[Path], list[Target]]:
    """Inputs as specs and charts; a chart lint refuses to read is that chart's problem, not the run's end."""
    specs: list[Path] = []
    charts: list[Target] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file() and path.suffix in (".yaml", ".yml"):
            specs.append(path)
            continue
        loaders: list[tuple[str, Callable[[], Target]]]
        if path.is_file() and path.name.endswith((".tgz", ".tar.gz")):
            loaders = [(str(path), functools.partial(_extract, path, stack))]
        elif path.is_dir() and (path / "Chart.yaml").is_file():
            label = raw.rstrip("/")
            loaders = [(label, functools.partial(_folder_target, path, label))]
        elif path.is_dir() and _chart_folders(path):
            labelled = [(f"{raw.rstrip('/')}/{folder.name}", folder) for folder in _chart_folders(path)]
            loaders = [(label, functools.partial(_folder_target, folder, label)) for label, folder in labelled]
        else:
            raise UsageError(f"{raw}: not a spec (.yaml), a chart folder, a folder of charts or a chart .tgz")
        for label, load in loaders:
            try:
                charts.append(load())
            except ChartInputError as exc:
                report.problems.append(exc.problem)
                report.checked.append(label)
    return specs, charts


def _folder_target(folder: Path, label: str) -> Target:
    return Target(read_chart(folder, label), folder)


def _chart_folders(folder: Path) -> list[Path]:
    """The charts in a folder of charts; hidden folders (an interrupted build's leftovers) are not charts."""
    return [p.parent for p in sorted(folder.glob("*/Chart.yaml"))
            if p.is_file() and not p.parent.name.startswith(".") and not is_leftover(p.parent)]


def _extract(archive: Path, stack: ExitStack) -> Target:
    """Unpack a chart archive after reading its headers: sizes, count and member kinds are checked before a
    byte is written, so a small archive cannot unpack into gigabytes."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="olarespack-tgz-")))
    if archive.stat().st_size > MAX_ARCHIVE_BYTES:
        raise ChartInputError(str(archive), f"larger than {MAX_ARCHIVE_BYTES // 2**20} MiB")
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            members: list[tarfile.TarInfo] = []
            total = 0
            for member in tar:
                if member.issym() or member.islnk() or not (member.isfile() or member.isdir()):
                    raise ChartInputError(str(archive), f"{member.name} is not a regular file or folder")
                total += member.size
                members.append(member)
                if len(members) > MAX_CHART_FILES or member.size > MAX_FILE_BYTES or total > MAX_CHART_BYTES:
                    raise ChartInputError(str(archive), f"unpacks larger than a chart may be ({MAX_CHART_FILES} "
                                         f"files, {MAX_FILE_BYTES // 2**20} MiB a file, "
                                         f"{MAX_CHART_BYTES // 2**20} MiB in all)")
            tar.extractall(tmp, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"{archive}: not a readable chart archive ({exc})") from None
    folders = [p.parent for p in tmp.glob("*/Chart.yaml")]
    if len(folders) != 1:
        raise UsageError(f"{archive}: expected one top folder holding Chart.yaml")
    return Target(read_chart(folders[0], str(archive)), folders[0])


def _spec_targets(specs: list[Path], stack: ExitStack, report: LintReport) -> list[Target]:
    """Each spec rendered for both manifest generations (the market serves either), one spec at a time so
    one broken spec does not hide the others' problems."""
    targets: list[Target] = []
    names: list[tuple[str, Any]] = []
    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="olarespack-lint-")))
    for spec in specs:
        for generation in GENERATIONS:
            try:
                [app] = render_apps([spec], generation)
            except ProblemsError as exc:
                report.problems += exc.problems
                break
            report.problems += app.warnings
            if generation == "current":
                names.append((app.file, app.spec))
                report.spec_names.append(app.spec.name)
            folder = root / generation / f"{len(targets)}" / app.spec.name
            write_chart(app.chart, folder)
            targets.append(Target(read_chart(folder, f"{app.file} [{generation}]"), folder))
    report.problems += duplicate_names(names)
    return targets


# --------------------------------------------------------------------------- helm


def _olares_env(manifest: dict[str, Any]) -> dict[str, str]:
    """What Olares puts in .Values.olaresEnv: each env's default; token envs get a sentinel so a token that
    leaks out of its Secret is caught."""
    env: dict[str, str] = {}
    for entry in manifest.get("envs") or []:
        name = str(entry.get("envName", ""))
        source = str((entry.get("valueFrom") or {}).get("envName", ""))
        if "TOKEN" in name or "TOKEN" in source:
            env[name] = SECRET_SENTINEL
        elif entry.get("default") is not None:
            env[name] = str(entry["default"])
    return env


def _entrance_names(manifest: dict[str, Any]) -> list[str]:
    return [str(e.get("name")) for key in ("entrances", "sharedEntrances") for e in manifest.get(key) or []]


def _values(chart: Chart, mode: str) -> dict[str, Any]:
    return install_values(chart.name, _entrance_names(chart.manifest), _olares_env(chart.manifest), mode)


def _lint_batches(targets: list[Target]) -> Iterator[tuple[list[Target], dict[str, Any]]]:
    """Charts whose values agree (domains aside) share one helm lint process."""
    groups: dict[str, list[Target]] = {}
    for target in targets:
        values = _values(target.chart, accelerator_modes(target.chart.manifest)[0][0])
        values.pop("domain")
        values["userspace"] = {}
        groups.setdefault(json.dumps(values, sort_keys=True), []).append(target)
    for group in groups.values():
        for start in range(0, len(group), LINT_BATCH):
            batch = group[start:start + LINT_BATCH]
            values = _values(batch[0].chart, accelerator_modes(batch[0].chart.manifest)[0][0])
            values["domain"] = {k: v for t in batch for k, v in _values(t.chart, "nvidia")["domain"].items()}
            yield batch, values


@dataclass(frozen=True)
class HelmCall:
    """One helm invocation (run) and what olarespack makes of its output (analyse), kept apart so the
    benchmark can time the bare invocations a lint needs."""

    run: Callable[[], Any]
    analyse: Callable[[Any], list[Problem]]


def _lint_call(helm: Helm, batch: list[Target], values: dict[str, Any]) -> HelmCall:
    def run() -> dict[Path, list[str]]:
        with values_file(values) as path:
            return helm.lint_many([t.folder for t in batch], path)

    def analyse(findings: dict[Path, list[str]]) -> list[Problem]:
        return [Problem(target.chart.label, "", f"helm {helm.version}: {line}",
                        "fix the template or the values it reads", rule="helm-lint")
                for target in batch for line in findings[target.folder]]

    return HelmCall(run, analyse)


def _template_call(helm: Helm, target: Target, mode: str) -> HelmCall:
    chart = target.chart
    namespace = f"{chart.name}-alice"

    def run() -> HelmResult:
        with values_file(_values(chart, mode)) as path:
            return helm.template(target.folder, chart.name, namespace, path)

    def analyse(out: HelmResult) -> list[Problem]:
        if not out.ok:
            return [Problem(chart.label, "", f"helm {helm.version} template ({mode}): {out.stderr.strip()}",
                            "fix the template or the values it reads", rule="helm-template")]
        try:
            documents = split_rendered(out.stdout)
        except yaml.YAMLError as exc:
            return [Problem(chart.label, "", f"rendered YAML does not parse ({mode}): {exc}", "fix the template",
                            rule="helm-template")]
        problems = rendered_problems(chart, Rendered(mode, namespace, documents), SECRET_SENTINEL)
        for source, document, _ in documents:
            name = f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"
            problems += [Problem(chart.where(source), f"{name}.{error.split(': ', 1)[0]}",
                                 f"Kubernetes {kube.KUBERNETES_VERSION} schema: {error.split(': ', 1)[-1]}",
                                 "fix the field's type or name", rule="kube-schema")
                         for error in kube.schema_errors(document)]
        return problems

    return HelmCall(run, analyse)


def helm_calls(targets: list[Target], helms: Sequence[Helm]) -> list[HelmCall]:
    """Every chart through `helm lint --strict` with each helm (batched), then `helm template` with the
    first (Helm 3, what Olares embeds) for each accelerator mode, for the Olares and schema rules."""
    calls = [_lint_call(helm, batch, values) for helm in helms for batch, values in _lint_batches(targets)]
    if helms:
        calls += [_template_call(helms[0], target, mode)
                  for target in targets for mode, _, _ in accelerator_modes(target.chart.manifest)]
    return calls


# --------------------------------------------------------------------------- entry point


def prepare(paths: list[str], stack: ExitStack, report: LintReport) -> list[Target]:
    """Inputs to chart folders on disk, with the pure layers' problems added to the report; returns the
    charts helm can render."""
    specs, targets = _classify(paths, stack, report)
    if specs:
        targets = _spec_targets(specs, stack, report) + targets
        report.checked += [str(s) for s in specs]
    report.checked += [t.chart.label for t in targets if " [" not in t.chart.label]
    renderable: list[Target] = []
    for target in targets:
        report.problems += manifest_problems(target.chart)
        if target.chart.manifest:
            renderable.append(target)
    return renderable


def lint(paths: list[str], helms: Sequence[Helm], jobs: int = 2) -> LintReport:
    report = LintReport()
    with ExitStack() as stack:
        calls = helm_calls(prepare(paths, stack, report), helms)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for problems in pool.map(lambda call: call.analyse(call.run()), calls):
                report.problems += problems
    report.problems = sorted(set(report.problems))
    return report
