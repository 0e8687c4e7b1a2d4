"""The fit arithmetic as users meet it: `olarespack fit`, and the build's context check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import APP_FILES, APPS, run_cli
from olarespack.cli import main
from olarespack.fit.budget import fit_report, resolve_context
from olarespack.render.plan import plan_chart
from olarespack.spec.load import load_spec
from specs import app_data, write_spec


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: p.stem)
def test_seed_apps_fit(path: Path) -> None:
    code, out, _ = invoke("fit", str(path))
    assert code == 0, out
    assert "fits: largest context" in out


def test_fit_json_reproduces_the_vllm_refusal() -> None:
    code, out, _ = invoke(
        "fit",
        str(APPS / "gemma4-vision.yaml"),
        "--max-model-len",
        "262144",
        "--kv-available-bytes",
        "3030200000",
        "--json",
    )
    assert code == 1
    report = json.loads(out)
    assert report["kv_cache_needed_bytes"] == 3_629_711_360
    assert report["kv_cache_available_bytes"] == 3_030_200_000
    assert (report["max_model_len_fit"], report["fits"]) == (203_584, False)


def test_fit_with_a_local_config(tmp_path: Path) -> None:
    config = Path(__file__).parent / "fixtures" / "gemma4-26b-a4b-config.json"
    data = app_data()
    data["engine"]["model"] = "someone/unknown-gemma-4-finetune"
    data["engine"].pop("speculative")
    spec = write_spec(tmp_path, data)
    code, _, err = invoke("fit", str(spec))
    assert code == 5 and "no architecture data" in err  # exit 5: no data, told apart from "does not fit"
    code, out, _ = invoke("fit", str(spec), "--config", str(config), "--weights-bytes", "17500000000", "--json")
    assert code == 0
    assert json.loads(out)["model"] == "someone/unknown-gemma-4-finetune"


def test_auto_context_resolves_to_the_largest_fit(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["max_model_len"] = "auto"
    path = write_spec(tmp_path, data)
    spec = load_spec(path)
    resolved, problems = resolve_context(str(path), spec)
    expected = fit_report(
        spec,
        calibrated_kv_available_bytes=round(2.82 * 2**30),
        calibrated_at_utilization=0.94,
        calibrated_total_bytes=24400 * 2**20,
    ).max_model_len_fit
    assert resolved.engine.max_model_len == expected > 131072  # type: ignore[union-attr]
    assert [p.rule for p in problems] == ["context-window"]  # past the 128K Gemma 4 was trained for
    plan = plan_chart(resolved, str(path))
    assert plan.effective_args[plan.effective_args.index("--max-model-len") + 1] == str(expected)


def test_build_renders_auto_and_warns_past_the_trained_window(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["max_model_len"] = 196608  # booted in seed post 2, past the native 128K, with 24400 MiB
    data["resources"]["gpu_memory"] = {"request": "24400Mi", "limit": "24400Mi"}
    path = write_spec(tmp_path, data)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, _, err = invoke("build", str(path), "--out", "charts")
    finally:
        os.chdir(old)
    assert code == 0, err
    assert "[context-window]" in err and "WARN" in err
    assert "196608" in (tmp_path / "charts/vllmgemma426ba4bvisionone/templates/deployment.yaml").read_text()


def test_an_unknown_model_with_a_fixed_context_only_warns(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["model"] = "someone/unknown-model"
    del data["engine"]["speculative"]
    del data["engine"]["calibration"]
    spec, problems = resolve_context("app.yaml", load_spec(write_spec(tmp_path, data)))
    assert [(p.rule, p.severity) for p in problems] == [("context-fit", "warning")]
    assert spec.engine.max_model_len == 131072  # type: ignore[union-attr]


def test_a_context_async_scheduling_takes_says_why_and_the_setting_that_keeps_it(project: Path) -> None:
    """On vLLM 0.33 async scheduling keeps two batches in flight in the sliding-window cache, and the vision
    app's 131072 tokens no longer fit: the refusal says so and names engine.async_scheduling: false, which
    keeps the context (the build then passes at 131072)."""
    spec = project / "apps" / "gemma4-vision.yaml"
    text = spec.read_text(encoding="utf-8").replace("vllm/vllm-openai:v0.21.0-cu129", "vllm/vllm-openai:v0.33.0-cu129")
    spec.write_text(text, encoding="utf-8")
    code, out = run_cli(project, "build", "apps/gemma4-vision.yaml")
    assert code == 1, out
    assert "async scheduling" in out and "engine.async_scheduling: false keeps the context" in out, out
    spec.write_text(
        text.replace("  enable_prefix_caching: true\n", "  enable_prefix_caching: true\n  async_scheduling: false\n"),
        encoding="utf-8",
    )
    code, out = run_cli(project, "build", "apps/gemma4-vision.yaml")
    assert code == 0, out


def test_a_llama_cpp_app_booking_the_whole_card_is_pointed_to_plan_write(project: Path) -> None:
    """llama.cpp takes only what its context needs: a spec that books the default (most of the card) is told
    that the rest stays unused and how to book its share; the shipped audio app, which books its share, is not."""
    code, out = run_cli(project, "build", "apps/gemma4-audio.yaml")
    assert code == 0 and "gpu-booking-unused" not in out, out
    spec = project / "apps" / "gemma4-audio.yaml"
    text = spec.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines(keepends=True) if "gpu_memory:" not in line]
    text = "".join(lines).replace("It books [[ resources.gpu_memory.request ]] of GPU memory, what", "It books what")
    spec.write_text(text, encoding="utf-8")
    code, out = run_cli(project, "build", "apps/gemma4-audio.yaml")
    assert code == 0, out
    assert "[gpu-booking-unused]" in out and "olarespack plan --write apps/gemma4-audio.yaml" in out, out
