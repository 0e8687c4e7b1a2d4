"""The pinned-model shape (olares.pinned_model): Olares' official LLM apps' shape rendered from the same typed
spec. The engine runs behind the Model Console with the model in the shared Hugging Face cache; Router calls the
app at its shared entrance. What matters: the server runs the flags the individual chart runs (ENGINE_ARGS is that
command line but the wrapper's own words), the chart passes Olares' linter as the market and olares-cli run it,
what the shape cannot carry is refused by field, and the official pinned-model apps import into specs that
rebuild their server command line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from conftest import shared
from olarespack.cli import main
from olarespack.core.errors import ProblemsError
from olarespack.engines import engine_for, pinned_problems
from olarespack.importer.compare import argv_differences
from olarespack.olares.generations import GENERATION_NAMES
from olarespack.project import load_apps
from olarespack.render import render_chart
from olarespack.render.plan import plan_chart
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

# what each engine's wrapper writes itself, with whether the flag takes a value: the rest of the individual
# chart's command line is ENGINE_ARGS
WRAPPER_WORDS = {
    "llamacpp": {
        "--model": True,
        "--mmproj": True,
        "--alias": True,
        "--host": True,
        "--port": True,
        "--log-verbosity": True,
    },
    "vllm": {"--served-model-name": True, "--host": True, "--port": True, "--download-dir": True},
}


def pinned_data(app: str) -> dict[str, Any]:
    """A shipped app in the pinned-model shape: the name the wrapper serves it under, the shared cache's files."""
    data = app_data(app)
    data["name"] = data["name"][:27] + "pin"
    data["olares"] = {"pinned_model": {"supports": ["tools"]}}
    engine = data["engine"]
    if engine["kind"] == "llamacpp":
        engine["model"].pop("folder", None)
        engine["model"].pop("saved_as", None)
        engine["alias"] = f"{engine['model']['repo']}:{engine['model']['file'].removesuffix('.gguf').rsplit('-', 1)[1]}"
    else:
        engine["served_model_name"] = engine["model"]
    return data


def without_wrapper_words(kind: str, argv: list[str], command: list[str]) -> list[str]:
    rest, skip = argv[len(command) :], 0
    kept = []
    for i, item in enumerate(rest):
        if skip:
            skip -= 1
            continue
        if item in WRAPPER_WORDS[kind]:
            skip = 1
            continue
        if kind == "vllm" and i == 0 and not item.startswith("-"):
            continue  # the model, positional after `vllm serve`
        kept.append(item)
    return kept


@pytest.mark.parametrize("app", ["gemma4-audio", "gemma4-vision", "gemma4-dflash"])
def test_engine_args_are_the_individual_charts_command_line(tmp_path: Path, app: str) -> None:
    """Done when: the pinned chart's engine command line equals the individual chart's (but what the wrapper
    writes: the model's location and name, the address, /metrics)."""
    data = pinned_data(app)
    pinned_file = write_spec(tmp_path, data, "pinned.yaml")
    data.pop("olares")
    individual_file = write_spec(tmp_path, data, "individual.yaml")
    pinned = plan_chart(load_spec(pinned_file), str(pinned_file))
    individual = plan_chart(load_spec(individual_file), str(individual_file))
    assert pinned.pinned is not None and individual.pinned is None
    shape = pinned.pinned.shape
    kind = data["engine"]["kind"]
    assert shape.effective_items() == without_wrapper_words(kind, individual.server_argv, individual.command)
    assert shape.effective_items(), "ENGINE_ARGS carries the flags"
    head = pinned.server_argv[: len(pinned.server_argv) - len(shape.effective_items())]
    assert head[: len(individual.command)] == individual.command
    assert head.count(shape.model_name) == 2  # the model and the name it is served under
    # the SPEC_CONFIG the seed charts know stays in the pod template, and ENGINE_ARGS cites it
    if "speculative" in data["engine"] and kind == "vllm":
        assert ("SPEC_CONFIG", individual.container_env[-1][1]) in pinned.container_env
        assert "$(SPEC_CONFIG)" in shape.engine_args_text()


@pytest.mark.helm
@pytest.mark.parametrize("app", ["gemma4-audio", "gemma4-vision"])
def test_the_pinned_chart_passes_lint_as_olares_lints_it(tmp_path: Path, app: str) -> None:
    """lint renders it with an install's values, with the values olares-cli chart lint gives (owner != admin),
    checks every object against the Kubernetes schemas and the manifest against oac's rules."""
    spec_file = write_spec(tmp_path, pinned_data(app))
    result = CliRunner().invoke(main, ["lint", str(spec_file)])
    assert result.exit_code == 0, result.output
    chart = render_chart(load_spec(spec_file), str(spec_file))
    manifest = yaml.safe_load(chart["OlaresManifest.yaml"])
    [shared_entrance] = manifest["sharedEntrances"]
    assert shared_entrance["host"] == "sharedentrances-api" and shared_entrance["authLevel"] == "internal"
    assert manifest["options"]["shared"] is True and manifest["options"]["LLMGatewaySupported"] is True
    assert manifest["spec"]["onlyAdmin"] is True and manifest["permission"]["appCommon"] is True
    envs = {e["envName"]: e for e in manifest["envs"]}
    shape = plan_chart(load_spec(spec_file), str(spec_file)).pinned.shape  # type: ignore[union-attr]
    assert envs["ENGINE_ARGS"]["default"] == shape.engine_args_effective()
    assert envs["MODEL_NAME"]["default"] == shape.model_name
    assert envs["MODEL_SUPPORTS"]["default"] == "tools"
    gpu_env = f"{shape.env_prefix}_REQUIRED_GPU_MEMORY"
    assert envs[gpu_env]["default"] == f"{load_spec(spec_file).gpu_memory() // 2**20}Mi"  # fit's booking
    assert set(manifest["workloadReplicas"]) == {load_spec(spec_file).name, "llminit"}
    service = yaml.safe_load(chart["templates/service.yaml"])
    assert service["metadata"]["name"] == shape.kind  # the Console proxies to http://<kind>:<port>
    assert service["spec"]["ports"][0]["port"] == shape.port


def test_a_pinned_app_is_offered_in_the_current_generation_only(tmp_path: Path) -> None:
    spec_file = write_spec(tmp_path, pinned_data("gemma4-audio"))
    apps, problems = load_apps([spec_file], GENERATION_NAMES)
    assert [p for p in problems if p.severity == "error"] == []
    assert list(apps[0].charts) == ["current"]


def test_what_the_shape_cannot_carry_is_refused_by_field(tmp_path: Path) -> None:
    data = pinned_data("gemma4-audio")
    engine = data["engine"]
    engine["alias"] = "gemma-4-e4b-audio"
    engine["model"]["revision"] = "abc123"
    engine["port"] = 9000
    engine["extra_args"] = ["--override-kv", "tokenizer.ggml.add_bos_token=bool:false", "--slot-save-path", "/tmp/s*"]
    path = write_spec(tmp_path, data)
    spec = load_spec(path)
    found = {(p.path, p.rule) for p in pinned_problems(str(path), spec)}
    assert ("engine.alias", "pinned-model-shape") in found
    assert ("engine.model.revision", "pinned-model-shape") in found
    assert ("engine.port", "pinned-model-shape") in found
    assert ("engine.extra_args[1]", "pinned-model-args") in found  # the wrapper drops a k=v word
    assert ("engine.extra_args[3]", "pinned-model-args") in found  # globbed
    vision = pinned_data("gemma4-vision")
    vision["engine"]["served_model_name"] = "gemma"
    path = write_spec(tmp_path, vision, "vision.yaml")
    assert [p.path for p in pinned_problems(str(path), load_spec(path))] == ["engine.served_model_name"]


def test_the_quantization_tag_must_find_the_file(tmp_path: Path) -> None:
    data = pinned_data("gemma4-audio")
    data["olares"]["pinned_model"]["tag"] = "Q8_0"
    data["engine"]["alias"] = f"{data['engine']['model']['repo']}:Q8_0"
    path = write_spec(tmp_path, data)
    [problem] = pinned_problems(str(path), load_spec(path))
    assert problem.path == "olares.pinned_model.tag" and "Q8_0" in problem.message


def test_the_legacy_generation_cannot_carry_a_shared_app(tmp_path: Path) -> None:
    data = pinned_data("gemma4-audio")
    data["olares"]["generation"] = "legacy"
    with pytest.raises(ProblemsError) as raised:
        load_spec(write_spec(tmp_path, data))
    assert [p.path for p in raised.value.problems if p.rule == "pinned-model-shape"] == ["olares.pinned_model"]


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell here")
@pytest.mark.parametrize("app", ["gemma4-audio", "gemma4-vision"])
def test_the_wrapper_runs_the_planned_command_line(tmp_path: Path, app: str) -> None:
    """The chart's own wrapper script, run by sh: it waits for the Console's sentinel, then execs the server with
    ENGINE_ARGS split into the very words the plan says (Kubernetes' $(SPEC_CONFIG) put in first)."""
    spec_file = write_spec(tmp_path, pinned_data(app))
    spec = load_spec(spec_file)
    chart = render_chart(spec, str(spec_file))
    plan = plan_chart(spec, str(spec_file))
    assert plan.pinned is not None
    shape = plan.pinned.shape
    script = yaml.safe_load(chart["templates/engine-wrapper.yaml"])["data"]["run-engine.sh"]
    sentinel = tmp_path / "state" / "model_download_finish"
    sentinel.parent.mkdir()
    sentinel.write_text("")
    printer = tmp_path / "server"
    printer.write_text('#!/bin/sh\nfor word in "$@"; do printf "%s\\n" "$word"; done\n')
    printer.chmod(0o755)
    command = " ".join(plan.command)
    assert f"exec {command} " in script
    script = script.replace("/run/llm-init/model_download_finish", str(sentinel)).replace(
        f"exec {command} ", f"exec {printer} "
    )
    env = dict(os.environ, MODEL_NAME=shape.model_name, WAIT_TIMEOUT="5")
    env.update(plan.container_env)
    env["ENGINE_ARGS"] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], shape.engine_args_text())
    out = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.splitlines() == plan.server_argv[len(plan.command) :]


def test_the_wrapper_gives_up_without_the_consoles_download(tmp_path: Path) -> None:
    spec_file = write_spec(tmp_path, pinned_data("gemma4-audio"))
    chart = render_chart(load_spec(spec_file), str(spec_file))
    script = yaml.safe_load(chart["templates/engine-wrapper.yaml"])["data"]["run-engine.sh"]
    script = script.replace("/run/llm-init/model_download_finish", str(tmp_path / "never")).replace(
        "sleep 5", "sleep 0"
    )
    out = subprocess.run(
        ["sh", "-c", script], env=dict(os.environ, WAIT_TIMEOUT="10"), capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 1 and "did not finish the download" in out.stderr


OFFICIAL = [
    "llamacppqwopus3627v2mtpq4kmv3",
    "llamacppqwen3827bggufv3",
    "llamacppqwen3635ba3bggufv3",
    "vllmgemma412bitawqint4v3",
]


@pytest.mark.helm
@pytest.mark.parametrize("app", OFFICIAL)
def test_official_pinned_apps_import_with_the_same_server(tmp_path: Path, app: str) -> None:
    chart = shared(f"corpus/olares-apps/{app}")
    result = CliRunner().invoke(main, ["import", str(chart), "--apps-dir", str(tmp_path)])
    assert "same server command line" in result.output or "not carried: volume mount /cache/vllm" in result.output, (
        result.output
    )
    spec = load_spec(tmp_path / f"{app}.yaml")
    assert spec.olares.pinned_model is not None
    manifest = yaml.safe_load((chart / "OlaresManifest.yaml").read_text(encoding="utf-8"))
    envs = {e["envName"]: e.get("default") for e in manifest["envs"]}
    shape = engine_for(spec.engine).pinned_shape(spec.olares.pinned_model.tag)
    assert shape is not None
    assert shape.model_name == envs["MODEL_NAME"]
    # the official wrapper's run of the manifest's ENGINE_ARGS, and the rebuilt chart's: the same flags and values
    # (spellings and order are the spec's: -c is --ctx-size)
    official = engine_for(spec.engine).engine.read_pinned(
        envs["MODEL_NAME"],
        envs["MODEL_SOURCE"],
        str(envs["ENGINE_ARGS"]),
        list(spec.engine.command or []),
        spec.engine.image,
    )
    assert official is not None
    assert argv_differences(official.chart_argv, shape.command_line(), spec.engine.kind) == []
    assert len(shape.effective_items()) == len(str(envs["ENGINE_ARGS"]).split())
    assert pinned_problems("x", spec) == []


@pytest.mark.helm
def test_a_pinned_chart_of_olarespack_round_trips(tmp_path: Path) -> None:
    spec_file = write_spec(tmp_path, pinned_data("gemma4-audio"))
    assert CliRunner().invoke(main, ["build", str(spec_file), "--charts-dir", str(tmp_path / "charts")]).exit_code == 0
    folder = tmp_path / "charts" / load_spec(spec_file).name
    result = CliRunner().invoke(main, ["import", str(folder), "--apps-dir", str(tmp_path / "again")])
    assert result.exit_code == 0 and "same server command line" in result.output, result.output
    again = yaml.safe_load(next((tmp_path / "again").glob("*.yaml")).read_text(encoding="utf-8"))
    assert again["olares"]["pinned_model"]["supports"] == ["tools"]
