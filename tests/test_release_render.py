"""The spec's typed fields are written as the image's engine release spells them (its release facts): what a
user typed once renders on every release that can run it, and a release that cannot is refused."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import APPS
from olarespack.engines import engine_for
from olarespack.engines.base import EngineSpec
from olarespack.spec.load import load_spec

LLAMA = "ghcr.io/ggml-org/llama.cpp:server-cuda13-b{}"


def engine(stem: str, **update: Any) -> EngineSpec:
    spec = load_spec(APPS / f"{stem}.yaml").engine
    return type(spec).model_validate({**spec.model_dump(exclude_unset=True), **update})


def items(spec: EngineSpec, *flags: str) -> list[str]:
    return [item for arg in engine_for(spec).args() if arg.flag in flags for item in arg.effective_items()]


def rules(spec: EngineSpec) -> dict[str, str]:
    return {p.rule: p.message for p in engine_for(spec).rules("apps/x.yaml", "rtx5090-laptop") if p.severity == "error"}


@pytest.mark.parametrize(
    ("build", "written"),
    [
        (9101, ["--mlock"]),
        (9246, ["--mlock"]),
        # b10867 still takes --mlock, but as a deprecated `--load-mode mlock` (no mmap): not what --mlock meant
        (10867, ["--load-mode", "mmap+mlock"]),
        (10878, ["--load-mode", "mmap+mlock"]),
        (11434, ["--load-mode", "mmap+mlock"]),
    ],
)
def test_mlock_is_written_as_the_build_spells_it(build: int, written: list[str]) -> None:
    assert items(engine("gemma4-audio", image=LLAMA.format(build)), "--mlock", "--load-mode") == written


def test_no_mlock_writes_neither() -> None:
    assert items(engine("gemma4-audio", image=LLAMA.format(11434), mlock=False), "--mlock", "--load-mode") == []


@pytest.mark.parametrize(
    ("typed", "build", "written"),
    [
        ("draft", 9113, "draft"),
        ("draft", 9246, "draft-simple"),
        ("draft", 11434, "draft-simple"),
        ("draft-simple", 9113, "draft"),
        ("eagle3", 11434, "draft-eagle3"),
        ("draft-eagle3", 9113, "eagle3"),
        ("ngram_simple", 9101, "ngram-simple"),
        ("draft-mtp", 11434, "draft-mtp"),
    ],
)
def test_speculative_types_are_named_as_the_build_names_them(typed: str, build: int, written: str) -> None:
    spec = engine("gemma4-audio", image=LLAMA.format(build), speculative={"type": typed})
    assert items(spec, "--spec-type") == ["--spec-type", written]
    assert "llamacpp-spec-type" not in rules(spec) or "drafter" in rules(spec)["llamacpp-spec-type"]


def test_a_type_the_build_lacks_is_refused_not_invented() -> None:
    spec = engine("gemma4-audio", image=LLAMA.format(9113), speculative={"type": "draft-mtp"})
    assert items(spec, "--spec-type") == ["--spec-type", "draft-mtp"]
    assert "not a speculative type of llama.cpp b9113" in rules(spec)["llamacpp-spec-type"]


def test_the_committed_audio_app_renders_as_before() -> None:
    assert items(engine("gemma4-audio"), "--mlock", "--load-mode") == ["--mlock"]


@pytest.mark.parametrize(
    "image", ["vllm/vllm-openai:v0.21.0-cu129", "vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:nightly-2026-11-20"]
)
def test_vllm_writes_the_speculative_method_as_typed_and_warns_of_the_alias(image: str) -> None:
    # what the user typed is what renders: vLLM runs gemma4_mtp as mtp and logs it as deprecated, which lint
    # says with the fix, and the user decides
    spec = engine(
        "gemma4-vision",
        image=image,
        speculative={
            "method": "gemma4_mtp",
            "model": "google/gemma-4-26B-A4B-it-assistant",
            "num_speculative_tokens": 3,
        },
    )
    assert '"method":"gemma4_mtp"' in items(spec, "--speculative-config")[1]
    alias = [p for p in engine_for(spec).rules("x.yaml", "rtx5090-laptop") if p.rule == "spec-mtp-alias"]
    assert [p.severity for p in alias] == ["warning"] and "method: mtp" in alias[0].fix
    if "nightly" not in image:
        assert "logs the alias as deprecated" in alias[0].message
    typed_mtp = engine("gemma4-vision", image=image)  # the shipped spec takes the fix: mtp, no warning
    assert '"method":"mtp"' in items(typed_mtp, "--speculative-config")[1]
    assert "spec-mtp-alias" not in {p.rule for p in engine_for(typed_mtp).rules("x.yaml", "rtx5090-laptop")}
