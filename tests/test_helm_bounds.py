"""helm runs a stranger's templates: a run that never ends, never stops printing or never stops allocating
ends in a message, and nothing it started outlives it. The real mechanism, on a stand-in executable that
behaves that way, and on the real helm for memory (its Go runtime is what dies)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import olarespack.helm
from conftest import CHARTS
from olarespack.cli import main
from olarespack.helm import HelmBinary, values_file

# answers the version probe like helm 3.19, then misbehaves as each command asks
STAND_IN = """#!/bin/sh
case "$1" in
  version) echo v3.19.0 ;;
  template) sleep 60 & echo $! > "$PIDFILE"; wait ;;
  lint) yes 'a line of a chart that prints forever' ;;
  package) echo 'packaged'; exit 0 ;;
  pull) printf 'panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()\n' >&2; exit 2 ;;
esac
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HelmBinary:
    path = tmp_path / "helm"
    path.write_text(STAND_IN, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PIDFILE", str(tmp_path / "child.pid"))
    return HelmBinary(path=str(path), timeout=1, output_limit=2**20)


def test_a_run_past_the_timeout_is_stopped_with_what_it_started(stand_in: HelmBinary, tmp_path: Path) -> None:
    started = time.monotonic()
    result = stand_in.template(tmp_path, "r", "ns", tmp_path / "values.yaml")
    assert time.monotonic() - started < 10
    assert (result.ok, result.stdout, result.stderr) == (False, "", "helm template did not finish within 1 s")
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def test_a_run_printing_past_the_limit_is_stopped(stand_in: HelmBinary, tmp_path: Path) -> None:
    findings = stand_in.lint_many([tmp_path / "a", tmp_path / "b"], tmp_path / "values.yaml")
    assert findings == {tmp_path / name: ["helm lint printed more than 1 MiB"] for name in ("a", "b")}


def test_a_run_within_bounds_answers_as_before(stand_in: HelmBinary, tmp_path: Path) -> None:
    result = stand_in.package(tmp_path, tmp_path)
    assert (result.ok, result.stdout) == (True, "packaged\n")


# each pass doubles the string: 16 B * 2**40 is far past any memory bound, reached within a second or two
DOUBLING = """{{- $s := "xxxxxxxxxxxxxxxx" }}{{- range until 40 }}{{- $s = print $s $s }}{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: doubled
data:
  size: {{ len $s | quote }}
"""
SMALL_BOUND = 256 * 2**20


@pytest.fixture
def doubling(tmp_path: Path) -> Path:
    chart = tmp_path / "doubling"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: doubling\nversion: 0.1.0\n", encoding="utf-8")
    (chart / "templates/doubled.yaml").write_text(DOUBLING, encoding="utf-8")
    return chart


@pytest.mark.helm
@pytest.mark.parametrize("name", ["helm", "helm4"])
def test_a_template_past_the_memory_bound_is_stopped_and_reported(name: str, doubling: Path) -> None:
    helm = HelmBinary(name=name, memory_limit=SMALL_BOUND)
    with values_file({}) as values:
        result = helm.template(doubling, "r", "ns", values)
    assert (result.ok, result.stdout, result.stderr) == (False, "", "helm template needed more than 256 MiB of memory")


@pytest.mark.helm
def test_a_batch_past_the_memory_bound_names_the_chart_that_was(doubling: Path) -> None:
    helm = HelmBinary(memory_limit=SMALL_BOUND)
    neighbour = CHARTS / "vllmgemma4dflashone"
    with values_file({}) as values:
        findings = helm.lint_many([doubling, neighbour], values)
    assert findings[doubling] == ["helm lint needed more than 256 MiB of memory"]
    assert not any("memory" in line for line in findings[neighbour])


@pytest.mark.helm
def test_lint_reports_the_memory_bound_on_the_chart_without_go_s_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = tmp_path / "vllmgemma4dflashone"
    shutil.copytree(CHARTS / chart.name, chart)
    (chart / "templates/doubled.yaml").write_text(DOUBLING, encoding="utf-8")
    monkeypatch.setattr(olarespack.helm, "MEMORY_LIMIT", SMALL_BOUND)
    result = CliRunner().invoke(main, ["lint", str(chart)], catch_exceptions=False)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.exit_code == 1
    assert (
        f"ERROR {chart}: helm v3.19.0 template (nvidia): helm template needed more than 256 MiB of memory" in output
    ), output
    assert "goroutine" not in output and "runtime." not in output


def test_a_go_crash_is_reported_by_its_first_line_alone(stand_in: HelmBinary) -> None:
    result = stand_in._run("pull")
    assert (result.ok, result.stderr) == (False, "helm pull crashed: panic: runtime error: index out of range")


@pytest.mark.helm
def test_under_a_lower_inherited_data_limit_helm_still_runs_within_it() -> None:
    # a hard limit cannot be raised again, so it is lowered in a child interpreter
    script = (
        "import resource; resource.setrlimit(resource.RLIMIT_DATA, (512 * 2**20, 512 * 2**20)); "
        "from olarespack.helm import HelmBinary; helm = HelmBinary(); print(helm.memory_limit, helm.version)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == str(512 * 2**20)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child not yet reaped by its (also killed) parent is a zombie: dead for this purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
