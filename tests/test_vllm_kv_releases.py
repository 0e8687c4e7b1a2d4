"""fit computes the KV cache as the image's vLLM release does: the figures of vLLM 0.21 and 0.33 (ENGINES.md
section 4, from vLLM's own functions) and the release boundaries of each change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olarespack.core.errors import ModelDataError
from olarespack.core.units import largest_fitting
from olarespack.engines.fit import FitReport
from olarespack.engines.vllm import kv as vllm_kv
from olarespack.engines.vllm.kv import VllmKvRules, vllm_cli_settings, vllm_kv_layout, vllm_kv_rules
from olarespack.fit.budget import fit_report, spec_calibration
from olarespack.models.arch import KvLayer, ModelInfo
from olarespack.models.registry import models
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

V021 = "vllm/vllm-openai:v0.21.0-cu129"
V033 = "vllm/vllm-openai:v0.33.0-cu129"
SEED_KV = round(2.82 * 2**30)  # the seed boot's "Available KV cache memory: 2.82 GiB"
BOOKED_KV = 2_633_687_368  # the vision app's calibrated budget on its 24000 MiB booking


def app(tmp_path: Path, name: str, image: str, **engine: Any) -> Any:
    data = app_data(name)
    data["engine"].pop("version", None)
    data["engine"].update(image=image, **engine)
    if "calibration" in data["engine"]:
        data["engine"]["calibration"]["image"] = image
    return load_spec(write_spec(tmp_path, data))


def vision(tmp_path: Path, image: str = V033, **kw: Any) -> FitReport:
    """The vision app on `image`, with its calibration (as `olarespack fit` reads it) unless a budget is given."""
    engine = {k: kw.pop(k) for k in ("async_scheduling", "extra_args") if k in kw}
    spec = app(tmp_path, "gemma4-vision", image, **engine)
    return fit_report(spec, **kw) if "kv_available_bytes" in kw else fit_report(spec, **spec_calibration(spec), **kw)


# --------------------------------------------------------------------------- the figures


def test_vision_on_033_needs_two_batches_in_flight(tmp_path: Path) -> None:
    report = vision(tmp_path, max_model_len=262144, kv_available_bytes=SEED_KV)
    assert report.kv_cache_needed_bytes == 4_468_572_160
    assert not report.fits and report.max_model_len_fit == 121_408
    assert report.settings["async_scheduling"] is True and report.settings["in_flight_batches"] == 2
    assert any("async scheduling (on by default)" in note for note in report.notes)


def test_vision_on_033_is_refused_at_its_context_on_its_booking(tmp_path: Path) -> None:
    report = vision(tmp_path)
    assert report.settings["vllm_release"] == "0.33.0"
    assert report.kv_cache_available_bytes == BOOKED_KV and report.overhead_source == "calibrated"
    assert report.kv_cache_needed_bytes == 3_126_394_880 and f"{report.kv_cache_needed_bytes / 2**30:.2f}" == "2.91"
    assert not report.fits
    assert report.max_model_len_fit == report.max_model_len_limit == 82_912
    assert report.utilization_needed is not None and report.utilization_needed > 0.94


def test_dflash_on_033(tmp_path: Path) -> None:
    report = fit_report(app(tmp_path, "gemma4-dflash", V033))
    assert report.kv_cache_needed_bytes == 2_014_904_320
    assert report.fits and report.max_model_len_limit == 16_928
    assert report.concurrency == pytest.approx(1.034, abs=5e-4)


def test_no_async_scheduling_gives_back_the_021_sizes(tmp_path: Path) -> None:
    old = vision(tmp_path, V021)
    for way in ({"async_scheduling": False}, {"extra_args": ["--no-async-scheduling"]}):
        new = vision(tmp_path, **way)
        assert new.kv_cache_needed_bytes == old.kv_cache_needed_bytes == 2_287_534_080
        assert new.fits and new.concurrency == old.concurrency == pytest.approx(1.151267726686721)
        assert new.settings["in_flight_batches"] == 1
        # from 0.29 one pool block (5 layers x 64 KiB) is held back from the check: two blocks of 16 tokens less
        assert old.max_model_len_limit == 164_864 and new.max_model_len_limit == 164_832
    seed = vision(tmp_path, max_model_len=262144, kv_available_bytes=SEED_KV, async_scheduling=False)
    assert seed.kv_cache_needed_bytes == 3_629_711_360 and seed.max_model_len_fit == 203_328  # vLLM's error text


def test_021_keeps_the_seed_figures(tmp_path: Path) -> None:
    report = vision(tmp_path, V021, max_model_len=262144, kv_available_bytes=SEED_KV)
    assert report.kv_cache_needed_bytes == 3_629_711_360 and report.max_model_len_fit == 203_360
    assert report.settings["async_scheduling"] is True and report.settings["in_flight_batches"] == 1
    dflash = fit_report(load_spec(Path(__file__).resolve().parents[1] / "apps" / "gemma4-dflash.yaml"))
    assert dflash.kv_cache_needed_bytes == 1_280_901_120 and dflash.max_model_len_limit == 55_520
    assert dflash.settings["vllm_release"] == "0.20.2"


def test_async_asked_on_an_old_release_changes_nothing(tmp_path: Path) -> None:
    assert vision(tmp_path, V021, async_scheduling=True).kv_cache_needed_bytes == 2_287_534_080


def test_mm_ipc_reservation_comes_out_of_the_kv_cache(tmp_path: Path) -> None:
    base = vision(tmp_path, async_scheduling=False)
    carved = vision(tmp_path, async_scheduling=False, extra_args=["--mm-ipc-gpu-memory-gb", "0.5"])
    assert carved.settings["mm_ipc_bytes"] == 2**29
    assert carved.kv_cache_available_bytes == base.kv_cache_available_bytes - 2**29
    assert carved.overhead_bytes == base.overhead_bytes + 2**29
    assert not carved.fits and any("mm-ipc" in note for note in carved.notes)
    # 0.21 has no such flag (vLLM would refuse it): nothing is carved out
    assert vision(tmp_path, V021, extra_args=["--mm-ipc-gpu-memory-gb=0.25"]).settings["mm_ipc_bytes"] == 0


def test_unknown_release_reads_as_the_oldest(tmp_path: Path) -> None:
    report = vision(tmp_path, "vllm/vllm-openai:nightly")
    assert report.settings["vllm_release"] == "unknown" and report.kv_cache_needed_bytes == 2_287_534_080
    assert any("engine.version" in note for note in report.notes)


# --------------------------------------------------------------------------- the rules per release


@pytest.mark.parametrize(
    ("release", "batches", "null_block", "mm_ipc"),
    [
        ((0, 20, 2), 1, False, 0),
        ((0, 24, 0), 1, False, 0),
        ((0, 25, 1), 1, False, 2**30),
        ((0, 26, 0), 2, False, 2**30),
        ((0, 28, 0), 2, False, 2**30),
        ((0, 29, 0), 2, True, 2**30),
        ((0, 33, 0), 2, True, 2**30),
    ],
)
def test_release_boundaries(release: tuple[int, int, int], batches: int, null_block: bool, mm_ipc: int) -> None:
    rules = vllm_kv_rules(release, method="mtp", mm_ipc_gpu_memory_gb=1)
    assert rules == VllmKvRules(batches, null_block, mm_ipc, True)
    assert vllm_kv_rules(release, method="mtp", async_scheduling=False).in_flight_batches == 1


@pytest.mark.parametrize(
    ("method", "release", "on"),
    [
        (None, (0, 33, 0), True),
        ("mtp", (0, 21, 0), True),
        ("gemma4_mtp", (0, 33, 0), True),
        ("dflash", (0, 21, 0), True),
        ("eagle3", (0, 33, 0), True),
        ("ngram_gpu", (0, 33, 0), True),
        ("ngram", (0, 33, 0), False),
        ("suffix", (0, 33, 0), False),
        ("draft_model", (0, 27, 1), False),
        ("draft_model", (0, 28, 0), True),
        ("draft_model", None, False),
    ],
)
def test_async_default_per_method(method: str | None, release: tuple[int, int, int] | None, on: bool) -> None:
    assert vllm_kv.vllm_async_default(release, method) is on


def test_cli_settings_last_one_wins() -> None:
    assert vllm_cli_settings([]) == (None, 0.0)
    assert vllm_cli_settings(["--async-scheduling", "--no-async-scheduling"]) == (False, 0.0)
    assert vllm_cli_settings(["--mm-ipc-gpu-memory-gb", "1.5", "--async-scheduling"]) == (True, 1.5)
    assert vllm_cli_settings(["--mm-ipc-gpu-memory-gb=2"]) == (None, 2.0)
    with pytest.raises(ModelDataError, match="mm-ipc-gpu-memory-gb 'lots'"):
        vllm_cli_settings(["--mm-ipc-gpu-memory-gb", "lots"])


def test_async_field_is_written_as_a_switch(tmp_path: Path) -> None:
    from olarespack.engines.vllm.engine import Vllm

    engine = app(tmp_path, "gemma4-vision", V033, async_scheduling=False).engine
    assert "--no-async-scheduling" in [a.flag for a in Vllm().args(engine)]
    unset = app(tmp_path, "gemma4-vision", V033).engine
    assert not any(a.flag and "async" in a.flag for a in Vllm().args(unset))


# --------------------------------------------------------------------------- against vLLM's own functions

FIGURES = json.loads((Path(__file__).parent / "fixtures" / "vllm_kv_figures.json").read_text(encoding="utf-8"))
CASE_MODELS = {
    "vision": ("cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",),
    "vision-bf16-mnbt2048": ("cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",),
    "dflash": ("cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit", "z-lab/gemma-4-26B-A4B-it-DFlash"),
}


def layers_of_repo(shipped: dict[str, ModelInfo], repo: str) -> tuple[KvLayer, ...]:
    arch = shipped[repo].arch
    assert arch is not None, repo
    return arch.layers


@pytest.mark.parametrize("version", sorted(FIGURES))
def test_fit_matches_vllms_functions(version: str) -> None:
    """tools/engine_releases/vllm_kv_check.py ran each release's get_kv_cache_configs over these cases."""
    release = tuple(int(p) for p in version.split("."))
    shipped = models()
    assert len(FIGURES[version]) >= 24
    for case in FIGURES[version]:
        layers = tuple(lay for repo in CASE_MODELS[case["case"]] for lay in layers_of_repo(shipped, repo))
        layout = vllm_kv_layout(layers, kv_dtype_bytes=case["kv_bytes"])
        rules = vllm_kv_rules((release[0], release[1], release[2]), method="mtp", async_scheduling=case["async"])
        in_flight, length = rules.in_flight_batches * case["mnbt"], case["max_model_len"]
        room = layout.plannable(case["available"], rules)
        assert layout.needed(length, in_flight) == case["needed"], case
        assert (case["needed"] <= room) is case["fits"], case
        if case["fits"]:
            assert layout.concurrency(length, in_flight, case["available"]) == pytest.approx(case["concurrency"])
            assert layout.num_blocks(case["available"]) == case["num_blocks"]
        else:
            found = largest_fitting(
                length,
                lambda n, lay=layout, tokens=in_flight, cap=room: (  # type: ignore[misc]
                    lay.needed(n, tokens) <= cap
                ),
            )
            assert found == case["estimated_max_model_len"], case
