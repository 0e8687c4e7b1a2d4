"""Checks across apps: two apps that would share an Olares id or a chart folder, and charts no spec renders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import run_cli, tree_bytes
from olarespack.olares.generations import app_id
from specs import app_data, write_spec

# md5("vllmapp65876")[:8] == md5("vllmapp92574")[:8] == "aa659d4d"
COLLIDING = ("vllmapp65876", "vllmapp92574")


def run(project: Path, *args: str) -> tuple[int, str]:
    return run_cli(project, *args)


@pytest.fixture
def colliding(project: Path) -> Path:
    for name in COLLIDING:
        data = app_data()
        data["name"] = name
        write_spec(project / "apps", data, f"{name}.yaml")
    return project


def test_the_names_do_collide() -> None:
    assert app_id(COLLIDING[0]) == app_id(COLLIDING[1])


def test_build_refuses_an_id_collision_naming_both(colliding: Path) -> None:
    before = tree_bytes(colliding / "charts")
    code, output = run(colliding, "build")
    assert code == 1
    for name in COLLIDING:
        line = next(line for line in output.splitlines() if f"apps/{name}.yaml: name:" in line)
        other = COLLIDING[1 - COLLIDING.index(name)]
        assert "[duplicate-id]" in line and f"{other!r} (apps/{other}.yaml)" in line and "aa659d4d" in line
    assert tree_bytes(colliding / "charts") == before


def test_a_build_of_one_spec_sees_its_neighbours(colliding: Path) -> None:
    code, output = run(colliding, "build", f"apps/{COLLIDING[0]}.yaml")
    assert code == 1 and "[duplicate-id]" in output and f"apps/{COLLIDING[1]}.yaml" in output


@pytest.mark.helm
def test_lint_and_publish_refuse_an_id_collision(colliding: Path) -> None:
    code, output = run(colliding, "lint")
    assert code == 1 and output.count("[duplicate-id]") == 2
    code, output = run(colliding, "publish", "--market-dir", "market")
    assert code == 1 and "[duplicate-id]" in output
    assert not (colliding / "market").exists()


def test_two_specs_with_one_name_are_named(project: Path) -> None:
    shutil.copy(project / "apps/gemma4-vision.yaml", project / "apps/copy.yaml")
    code, output = run(project, "build")
    assert code == 1
    assert "apps/copy.yaml: name: 'vllmgemma426ba4bvisionone' is also the name in apps/gemma4-vision.yaml" in output


def test_an_orphaned_chart_fails_the_drift_check(project: Path) -> None:
    (project / "apps/gemma4-audio.yaml").rename(project / "removed.yaml")
    code, output = run(project, "build", "--check")
    assert code == 1
    assert "ORPHAN charts/llamacppgemma4audione: no spec renders this chart" in output
    assert "[orphan-chart]" in output
    code, output = run(project, "build")
    assert code == 0 and "WARN charts/llamacppgemma4audione" in output
    assert (project / "charts/llamacppgemma4audione").is_dir()  # reported, never deleted


@pytest.mark.helm
def test_lint_and_the_gate_report_an_orphaned_chart(project: Path) -> None:
    (project / "apps/gemma4-audio.yaml").unlink()
    code, output = run(project, "lint")
    assert code == 1 and "charts/llamacppgemma4audione: no spec renders this chart" in output
    import subprocess

    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, check=True)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], cwd=project, check=True)
    code, output = run(project, "diff")
    assert code == 1 and "[orphan-chart]" in output
