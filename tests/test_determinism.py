"""The same specs give byte-identical output in separate interpreters (different hash seeds, different
working folders): a value that depended on set or dict order, the clock or the process would show here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import APPS, tree_bytes


def olarespack(cwd: Path, seed: str, *args: str) -> None:
    script = "import sys; from olarespack.cli import main; main.main(sys.argv[1:], prog_name='olarespack')"
    env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": "Pacific/Kiritimati" if seed == "1" else "UTC"}
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def project(root: Path) -> Path:
    shutil.copytree(APPS, root / "apps")
    return root


def test_two_builds_in_two_interpreters_are_identical(tmp_path: Path) -> None:
    first, second = project(tmp_path / "a"), project(tmp_path / "b")
    olarespack(first, "1", "build", "--charts-dir", "out")
    olarespack(second, "2", "build", "--charts-dir", "out", "--olares-version", "1.12.6")
    assert tree_bytes(first / "out") == tree_bytes(second / "out") != {}


@pytest.mark.helm
def test_two_publishes_in_two_interpreters_are_identical(tmp_path: Path) -> None:
    first, second = project(tmp_path / "a"), project(tmp_path / "b")
    olarespack(first, "1", "publish", "--market-dir", "market")
    olarespack(second, "2", "publish", "--market-dir", "market")
    assert tree_bytes(first / "market") == tree_bytes(second / "market") != {}
