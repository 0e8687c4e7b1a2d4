"""helm runs a stranger's templates: a run that never ends or never stops printing ends in a message, and
nothing it started outlives it. The real mechanism, on a stand-in executable that behaves that way."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from olarespack.helm import HelmBinary

# answers the version probe like helm 3.19, then misbehaves as each command asks
STAND_IN = """#!/bin/sh
case "$1" in
  version) echo v3.19.0 ;;
  template) sleep 60 & echo $! > "$PIDFILE"; wait ;;
  lint) yes 'a line of a chart that prints forever' ;;
  package) echo 'packaged'; exit 0 ;;
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
