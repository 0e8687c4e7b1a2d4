"""What bench reads of each engine's server: vLLM's drafting counters in its Prometheus /metrics (a recorded
text in vLLM 0.21's exposition: counter names from vllm/v1/spec_decode/metrics.py, labels model_name and engine
from vllm/v1/metrics/loggers.py, the `_total` samples and `_created` gauges prometheus_client writes; the
figures are the vision app's seed measurement, 25920 accepted of 29997 drafted), and llama.cpp's per-completion
`timings` (result_timings::to_json in b9101, server_slot_stats::to_json in b11434)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import APPS
from olarespack.engines import engine_for
from olarespack.engines.base import DraftCounts, EngineBench, ServerTimings
from olarespack.spec.load import load_spec

METRICS = (Path(__file__).parent / "fixtures" / "bench" / "vllm-0.21-metrics.txt").read_text(encoding="utf-8")


def bench_of(app: str) -> EngineBench:
    return engine_for(load_spec(APPS / app).engine).engine.bench()


VLLM, LLAMACPP = bench_of("gemma4-vision.yaml"), bench_of("gemma4-audio.yaml")


def test_the_recorded_vllm_metrics_give_the_seed_acceptance() -> None:
    counts = VLLM.draft_counts(METRICS)
    assert counts == DraftCounts(drafted=29997, accepted=25920)
    assert round(100 * counts.accepted / counts.drafted, 1) == 86.4  # the vision post's 86.4%
    assert VLLM.metrics_path == "/metrics"


def test_counters_are_summed_over_engine_cores() -> None:
    second = "\n".join(
        line.replace('engine="0"', 'engine="1"')
        for line in METRICS.splitlines()
        if line.startswith("vllm:spec_decode_num_")
    )
    assert VLLM.draft_counts(METRICS + "\n" + second) == DraftCounts(2 * 29997, 2 * 25920)


def test_a_server_without_drafting_has_no_counters() -> None:
    plain = "\n".join(line for line in METRICS.splitlines() if "spec_decode" not in line)
    assert "vllm:generation_tokens_total" in plain
    assert VLLM.draft_counts(plain) is None
    assert VLLM.draft_counts("") is None


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("} 29997.0", "} -5.0", "not a count"),
        ("} 29997.0", "} NaN", "not a count"),
        ("} 29997.0", "} lots", "is 'lots', not a number"),
        ("} 29997.0", "}", "not a Prometheus sample"),
        ("} 25920.0", "} 30000.0", "30000 tokens accepted of 29997 drafted"),
    ],
)
def test_counters_that_cannot_be_are_refused(old: str, new: str, said: str) -> None:
    line = next(
        found for found in METRICS.splitlines() if found.startswith("vllm:spec_decode_num_") and found.endswith(old)
    )
    with pytest.raises(ValueError, match=said):
        VLLM.draft_counts(METRICS.replace(line, line.replace(old, new)))


def test_a_label_value_with_braces_and_spaces_still_parses() -> None:
    odd = METRICS.replace('model_name="gemma-4-26b-a4b-vision"', 'model_name="my {odd} model"')
    assert VLLM.draft_counts(odd) == DraftCounts(29997, 25920)


def test_llamacpp_timings_are_the_servers_rate() -> None:
    b9101 = {
        "cache_n": 0,
        "prompt_n": 71,
        "prompt_ms": 20.636,
        "prompt_per_token_ms": 0.2906,
        "prompt_per_second": 3440.589,
        "predicted_n": 16,
        "predicted_ms": 3.438,
        "predicted_per_token_ms": 0.214875,
        "predicted_per_second": 4653.868528214078,
    }
    assert LLAMACPP.timings({"timings": b9101}) == ServerTimings(16, 3.438, 4653.868528214078)
    drafted = {**b9101, "draft_n": 108, "draft_n_accepted": 3}
    assert LLAMACPP.timings({"timings": drafted}) == ServerTimings(16, 3.438, 4653.868528214078, 108, 3)
    # b11434 counts the decode steps, predicted_n - 1: the first token comes with the prompt
    b11434 = {"predicted_n": 24, "predicted_ms": 61.771, "predicted_per_second": 372.3430411034628}
    assert LLAMACPP.timings({"timings": b11434}) == ServerTimings(24, 61.771, 372.3430411034628)
    assert LLAMACPP.timings({"usage": {}}) is None
    assert LLAMACPP.timings({"timings": {"prompt_n": 3}}) is None  # a progress event, not a completion's timing
    assert VLLM.timings({"timings": b9101}) is None  # vLLM reports none: its rate is the client's


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"predicted_ms": 0}, "16 tokens in 0 ms"),
        ({"predicted_per_second": 9000.0}, "is neither predicted_n nor predicted_n - 1 over predicted_ms"),
        ({"predicted_n": -1}, "not a count"),
        ({"predicted_ms": "fast"}, "not a number"),
        ({"draft_n": 4, "draft_n_accepted": 5}, "5 draft tokens accepted of 4 drafted"),
    ],
)
def test_llamacpp_timings_that_cannot_be_are_refused(change: dict[str, object], said: str) -> None:
    timings = {"predicted_n": 16, "predicted_ms": 3.438, "predicted_per_second": 4653.868528214078, **change}
    with pytest.raises(ValueError, match=said):
        LLAMACPP.timings({"timings": timings})


def test_each_engine_names_its_served_model_and_its_speed_settings() -> None:
    vision, audio = load_spec(APPS / "gemma4-vision.yaml"), load_spec(APPS / "gemma4-audio.yaml")
    assert VLLM.served_name(vision.engine) == "gemma-4-26b-vision"
    assert LLAMACPP.served_name(audio.engine) == "gemma-4-e4b-audio"
    settings = LLAMACPP.speed_settings(audio.engine)
    assert settings["model"] == {
        "repo": "unsloth/gemma-4-E4B-it-GGUF",
        "file": "gemma-4-E4B-it-Q4_K_M.gguf",
        "mmproj": "mmproj-BF16.gguf",
        "revision": "main",
    }  # not where the files are kept
    assert settings["flash_attn"] == "on" and "alias" not in settings
    assert set(VLLM.speed_settings(vision.engine)) == set(VLLM.speed_fields)
    assert "gpu_memory_utilization" not in VLLM.speed_fields and "served_model_name" not in VLLM.speed_fields
