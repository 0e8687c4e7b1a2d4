from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import ROOT, tree_bytes
from olarespack.cli import main
from olarespack.cli.build import app_spec_schema
from specs import app_data, write_spec


@pytest.fixture
def run(project: Path):  # type: ignore[no-untyped-def]
    def invoke(*args: str) -> tuple[int, str, str]:
        old = os.getcwd()
        os.chdir(project)
        try:
            result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        finally:
            os.chdir(old)
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_build_all_apps_is_idempotent(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("build", "--out", "out")
    assert code == 0
    assert out.count("created") == 3
    first = tree_bytes(project / "out")
    code, out, _ = run("build", "--out", "out")
    assert (code, out.count("unchanged")) == (0, 3)
    assert tree_bytes(project / "out") == first


def test_build_one_spec(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    code, _, _ = run("build", "apps/gemma4-vision.yaml", "--out", "out")
    assert code == 0
    assert [p.name for p in (project / "out").iterdir()] == ["vllmgemma426ba4bvisionone"]


def test_committed_charts_are_up_to_date(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("build", "--check")
    assert code == 0, out
    assert out.count("up to date") == 3


def test_check_reports_drift_and_writes_nothing(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    spec = project / "apps/gemma4-vision.yaml"
    spec.write_text(
        spec.read_text(encoding="utf-8").replace("max_model_len: 131072", "max_model_len: 65536"), encoding="utf-8"
    )
    stray = project / "charts/vllmgemma4dflashone/templates/stray.yaml"
    stray.write_text("kind: Stray\n", encoding="utf-8")
    before = tree_bytes(project / "charts")
    code, out, err = run("build", "--check")
    assert code == 1
    assert "DRIFT vllmgemma426ba4bvisionone" in out and "templates/deployment.yaml" in out
    assert "DRIFT vllmgemma4dflashone" in out and "templates/stray.yaml" in out
    assert "ok llamacppgemma4audione: up to date" in out
    assert "olarespack build" in err
    assert tree_bytes(project / "charts") == before
    assert run("build")[0] == 0
    assert not stray.exists()
    assert run("build", "--check")[0] == 0


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["engine"].update(max_model_length=1), "engine.max_model_length"),
        (lambda d: d["engine"].update(max_model_len="big"), "engine.max_model_len"),
        (lambda d: d["metadata"].pop("title"), "metadata.title"),
    ],
)
def test_bad_spec_exits_1_names_file_and_path_and_leaves_charts_alone(project: Path, run, mutate, path: str) -> None:  # type: ignore[no-untyped-def]
    data = app_data()
    mutate(data)
    write_spec(project / "apps", data, "gemma4-vision.yaml")
    before = tree_bytes(project / "charts")
    code, out, err = run("build")
    assert code == 1
    assert f"FAIL apps/gemma4-vision.yaml: {path}:" in err
    assert "nothing was written" in err
    assert tree_bytes(project / "charts") == before
    assert "created" not in out and "updated" not in out


def test_invalid_yaml_exits_1(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    (project / "apps/gemma4-audio.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    before = tree_bytes(project / "charts")
    code, _, err = run("build")
    assert code == 1
    assert "FAIL apps/gemma4-audio.yaml: line 2" in err and "invalid YAML" in err
    assert tree_bytes(project / "charts") == before


def test_two_specs_with_one_name(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    write_spec(project / "apps", app_data(), "copy.yaml")
    code, _, err = run("build")
    assert code == 1
    assert "FAIL apps/copy.yaml: name:" in err and "FAIL apps/gemma4-vision.yaml: name:" in err


def test_usage_errors_exit_2(run) -> None:  # type: ignore[no-untyped-def]
    assert run("build", "apps/missing.yaml")[0] == 2
    assert run("build", "--olares-version", "1.11.0")[0] == 2
    assert run("build", "--no-such-option")[0] == 2
    assert run("build", "--apps-dir", "nowhere")[0] == 2


def test_olares_version_selects_the_legacy_generation(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    code, _, _ = run("build", "--olares-version", "1.12.5", "--out", "legacy")
    assert code == 0
    manifest = (project / "legacy/vllmgemma426ba4bvisionone/OlaresManifest.yaml").read_text(encoding="utf-8")
    assert "olaresManifest.version: '0.10.0'" in manifest


def test_schema_is_up_to_date() -> None:
    committed = (ROOT / "schemas/app-spec.schema.json").read_text(encoding="utf-8")
    assert committed == app_spec_schema(), "run `olarespack schema` and commit"
    assert json.loads(committed)["additionalProperties"] is False


def test_schema_command(project: Path, run) -> None:  # type: ignore[no-untyped-def]
    assert run("schema", "--check")[0] == 1
    assert run("schema")[0] == 0
    assert run("schema", "--check")[0] == 0


def test_spec_files_point_editors_at_the_schema() -> None:
    for spec in sorted((ROOT / "apps").glob("*.yaml")):
        first = spec.read_text(encoding="utf-8").splitlines()[0]
        assert first == "# yaml-language-server: $schema=../schemas/app-spec.schema.json", spec


@pytest.mark.parametrize(
    "command", [["lint", "apps/gemma4-audio.yaml"], ["publish", "--market-dir", "m"], ["package", "--out", "dist"]]
)
def test_missing_helm_exits_3(
    run,
    monkeypatch: pytest.MonkeyPatch,
    project: Path,  # type: ignore[no-untyped-def]
    command: list[str],
) -> None:
    monkeypatch.setenv("OLARESPACK_HELM", str(project / "no-such-helm"))
    monkeypatch.setenv("OLARESPACK_HELM4", str(project / "no-such-helm"))
    code, _, err = run(*command)
    assert code == 3, err
    assert "cannot run helm" in err
