"""Engine-flag rules on specs: the seed apps pass, and the warnings (which the bad-spec corpus, made of
errors, cannot show) fire where they should."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import APP_FILES, APPS
from olarespack.core.errors import SpecError
from olarespack.engines import engine_problems
from olarespack.engines.vllm import ENGINE as VLLM
from olarespack.engines.vllm import VllmEngine
from olarespack.spec.load import load_spec
from olarespack.spec.models import AppSpec
from specs import app_data, write_spec


def load_with(tmp_path: Path, app: str, change: dict[str, object]) -> AppSpec:
    data = app_data(app)
    data["engine"].update(change)
    return load_spec(write_spec(tmp_path, data))


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: p.stem)
def test_seed_apps_have_no_engine_errors(path: Path) -> None:
    problems = engine_problems(str(path), load_spec(path))
    assert [p for p in problems if p.severity == "error"] == []


def test_the_vision_app_has_no_engine_problems() -> None:
    assert engine_problems("v.yaml", load_spec(APPS / "gemma4-vision.yaml")) == []


def test_gemma4_mtp_is_reported_as_an_alias_where_no_release_table_applies(tmp_path: Path) -> None:
    spec = load_with(
        tmp_path,
        "gemma4-vision",
        {
            "image": "vllm/vllm-openai:nightly-2026-11-20",
            "speculative": {
                "method": "gemma4_mtp",
                "model": "google/gemma-4-26B-A4B-it-assistant",
                "num_speculative_tokens": 3,
            },
        },
    )
    problems = [(p.rule, p.path, p.severity) for p in engine_problems("v.yaml", spec)]
    assert ("spec-mtp-alias", "engine.speculative.method", "warning") in problems
    # beside it: whether a nightly knows the method at all, and the calibration of the pinned image
    assert {rule for rule, _, _ in problems} == {"spec-mtp-alias", "spec-method-version", "calibration-stale"}


def test_mtp_as_written_by_vllm_is_not_an_alias(tmp_path: Path) -> None:
    spec = load_with(
        tmp_path,
        "gemma4-vision",
        {"speculative": {"method": "mtp", "model": "google/gemma-4-26B-A4B-it-assistant", "num_speculative_tokens": 3}},
    )
    assert engine_problems("v.yaml", spec) == []


def test_unknown_vllm_version_is_a_warning_for_version_bound_methods(tmp_path: Path) -> None:
    spec = load_with(tmp_path, "gemma4-dflash", {})
    assert isinstance(spec.engine, VllmEngine)
    assert VLLM.release(spec.engine) == (0, 20, 2)  # from engine.version: the tag says nothing
    data = app_data("gemma4-dflash")
    del data["engine"]["version"]
    unknown = load_spec(write_spec(tmp_path, data, "unknown.yaml"))
    assert [(p.rule, p.severity) for p in engine_problems("d.yaml", unknown)] == [("spec-method-version", "warning")]


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("vllm/vllm-openai:v0.21.0-cu129", (0, 21, 0)),
        ("vllm/vllm-openai:v0.20.1", (0, 20, 1)),
        ("vllm/vllm-openai:v0.21.0-cu129@sha256:" + "c" * 64, (0, 21, 0)),  # a digest pins, the tag still tells
        ("vllm/vllm-openai@sha256:" + "c" * 64, None),
        ("vllm/vllm-openai:nightly-abc", None),
    ],
)
def test_vllm_release_from_the_tag(tmp_path: Path, image: str, release: tuple[int, int, int] | None) -> None:
    spec = load_with(tmp_path, "gemma4-vision", {"image": image})
    assert isinstance(spec.engine, VllmEngine)
    assert VLLM.release(spec.engine) == release


def test_dflash_at_the_limit_passes(tmp_path: Path) -> None:
    spec = load_with(
        tmp_path,
        "gemma4-dflash",
        {"speculative": {"method": "dflash", "model": "z-lab/gemma-4-26B-A4B-it-DFlash", "num_speculative_tokens": 15}},
    )
    assert engine_problems("d.yaml", spec) == []


def test_digest_pinned_images_pass(tmp_path: Path) -> None:
    spec = load_with(tmp_path, "gemma4-audio", {"downloader_image": "docker.io/alpine@sha256:" + "a" * 64})
    assert engine_problems("a.yaml", spec) == []


def test_unknown_extra_args_pass_through(tmp_path: Path) -> None:
    spec = load_with(tmp_path, "gemma4-vision", {"extra_args": ["--max-logprobs", "5", "--enable-log-requests"]})
    assert [p.rule for p in engine_problems("v.yaml", spec)] == []


def test_an_unreadable_spec_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "missing.yaml")
    assert [(p.rule, p.path) for p in caught.value.problems] == [("file", "")]


def test_a_ubatch_above_the_batch_is_a_warning(tmp_path: Path) -> None:
    """llama_context caps n_ubatch at n_batch and boots: lint says so and never refuses what the engine accepts."""
    spec = load_with(tmp_path, "gemma4-audio", {"ubatch_size": 2048, "batch_size": 512})
    [found] = [p for p in engine_problems("app.yaml", spec) if p.rule == "ubatch-batch"]
    assert found.severity == "warning" and found.path == "engine.ubatch_size" and "caps it at 512" in found.message


def test_fewer_batched_tokens_than_drafted_slots_is_a_warning(tmp_path: Path) -> None:
    """vLLM 0.21 and 0.32 accept max_num_batched_tokens 12 for 4 sequences drafting 3 tokens (it refuses only
    fewer than max_num_seqs, SchedulerConfig): lint warns, and never refuses what the release accepts."""
    spec = load_with(tmp_path, "gemma4-vision", {"max_num_batched_tokens": 12})
    [found] = [p for p in engine_problems("app.yaml", spec) if p.rule == "batched-tokens"]
    assert found.severity == "warning" and "use at least 16" in found.fix


def test_draft_mtp_on_a_model_without_mtp_layers_is_a_warning(tmp_path: Path) -> None:
    """b11434 exits on it ("context type MTP requested but model doesn't contain MTP layers", its CPU server); a
    warning, since model data written before olarespack read MTP layers names none either."""
    from specs import app_data, write_spec

    data = app_data("gemma4-audio")
    data["engine"].update(image="ghcr.io/ggml-org/llama.cpp:server-cuda13-b11434", speculative={"type": "draft-mtp"})
    path = write_spec(tmp_path, data)
    found = [p for p in engine_problems(str(path), load_spec(path)) if p.rule == "llamacpp-mtp-layers"]
    assert [(p.path, p.severity) for p in found] == [("engine.speculative.type", "warning")]
    assert "unsloth/gemma-4-E4B-it-GGUF" in found[0].message
    data["engine"]["speculative"] = {"type": "ngram-simple"}
    path = write_spec(tmp_path, data)
    assert not [p for p in engine_problems(str(path), load_spec(path)) if p.rule == "llamacpp-mtp-layers"]
