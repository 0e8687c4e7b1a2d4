"""Consistency rules: drafters made for their target, parsers that suit the model's family, calibrations tied to
what they were measured on, citations of fields a spec no longer has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import run_cli
from olarespack.engines.calibration import calibration_problems
from olarespack.engines.consistency import (
    base_name,
    drafter_problems,
    family_from_name,
    family_of,
    parser_problems,
)
from olarespack.engines.vllm import ENGINE, VllmCalibration
from olarespack.models.arch import KvLayer, ModelArch, ModelInfo
from olarespack.models.registry import models

TARGET = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"
MTP = "google/gemma-4-26B-A4B-it-assistant"
DFLASH = "z-lab/gemma-4-26B-A4B-it-DFlash"


def _info(
    repo: str,
    hidden: int | None = None,
    vocab: int | None = None,
    family: str | None = None,
    drafter_for: tuple[str, ...] = (),
) -> ModelInfo:
    arch = (
        ModelArch(layers=(KvLayer("full", 8, 128),), num_hidden_layers=1, hidden_size=hidden, vocab_size=vocab)
        if hidden
        else None
    )
    return ModelInfo(
        repo=repo, title=repo, arch=arch, kv="own" if arch else "shared", family=family, drafter_for=drafter_for
    )


def test_base_names_drop_quantization_suffixes() -> None:
    assert base_name(TARGET) == base_name("google/gemma-4-26B-A4B-it") == "gemma-4-26b-a4b-it"
    assert base_name("Qwen/Qwen3-8B-AWQ") == "qwen3-8b"
    assert base_name("RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16") == "llama-3.3-70b-instruct"
    assert base_name("unsloth/gemma-4-E4B-it-GGUF") == "gemma-4-e4b-it"
    assert base_name("x/awq") == "awq"  # never empty


def test_families_from_names() -> None:
    assert family_from_name("Qwen/Qwen3-8B-AWQ") == "qwen3"
    assert family_from_name(DFLASH) == "gemma4"
    assert family_from_name("mistralai/Mistral-Small-3.2-24B-Instruct-2506") == "mistral"
    assert family_from_name("someone/my-own-model") is None
    assert family_from_name("NousResearch/Hermes-3-Llama-3.1-8B") == "llama3"
    # a name that marks two families tells none
    assert family_from_name("someone/qwen3-gemma-4-merge") is None


def test_facts_family_wins_over_the_name() -> None:
    registry = {"someone/renamed": _info("someone/renamed", 2816, family="gemma4_text")}
    assert family_of("someone/renamed", registry) == "gemma4"
    # a model_type the table leaves out (the generic llama) tells no family: the name decides
    registry = {"x/Qwen3-fork": _info("x/Qwen3-fork", 4096, family="llama")}
    assert family_of("x/Qwen3-fork", registry) == "qwen3"


@pytest.mark.parametrize("drafter", [MTP, DFLASH])
def test_the_seed_drafters_are_made_for_the_seed_target(drafter: str) -> None:
    assert list(drafter_problems("f.yaml", "engine.speculative", TARGET, drafter, models())) == []
    assert list(drafter_problems("f.yaml", "engine.speculative", "google/gemma-4-26B-A4B-it", drafter, models())) == []


def test_a_drafter_listed_for_another_target_is_refused() -> None:
    [problem] = drafter_problems("f.yaml", "engine.speculative", "Qwen/Qwen3-8B-AWQ", MTP, models())
    assert problem.rule == "drafter-target" and problem.path == "engine.speculative"
    assert "made for" in problem.message and "Qwen/Qwen3-8B-AWQ" in problem.message
    # another size of the same family: drafter_for decides, not the family
    registry = {MTP: _info(MTP, drafter_for=("google/gemma-4-26B-A4B-it",))}
    assert [p.rule for p in drafter_problems("f", "p", "google/gemma-4-E4B-it", MTP, registry)] == ["drafter-target"]


def test_facts_compare_hidden_size_and_vocabulary() -> None:
    registry = {"a/target": _info("a/target", 4096, 151936), "b/draft": _info("b/draft", 2048, 151936)}
    [problem] = drafter_problems("f", "p", "a/target", "b/draft", registry)
    assert "hidden size 2048" in problem.message
    registry["b/draft"] = _info("b/draft", 4096, 32000)
    [problem] = drafter_problems("f", "p", "a/target", "b/draft", registry)
    assert "vocabulary of 32000" in problem.message
    # same sizes: a drafter of another architecture family (DFlash, EAGLE are Llama/Qwen-style decoders) is fine
    registry["b/draft"] = _info("b/draft", 4096, 151936, family="llama")
    assert list(drafter_problems("f", "p", "a/target", "b/draft", registry)) == []


def test_names_decide_when_facts_are_missing() -> None:
    assert [p.rule for p in drafter_problems("f", "p", "Qwen/Qwen3-8B", "z-lab/gemma-4-31B-it-DFlash", {})] == [
        "drafter-target"
    ]
    assert list(drafter_problems("f", "p", "Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3", {})) == []
    # nothing known on one side: nothing is said
    assert list(drafter_problems("f", "p", "someone/custom-model", MTP, {})) == []


def test_parsers_suit_the_family() -> None:
    registry = models()
    [problem] = parser_problems("f.yaml", "Qwen/Qwen3-8B-AWQ", registry, tool_parser="gemma4")
    assert (problem.rule, problem.path, problem.severity) == ("parser-family", "engine.tool_call_parser", "error")
    assert "qwen3_coder" in problem.fix
    assert (
        list(parser_problems("f", "Qwen/Qwen3-8B-AWQ", registry, tool_parser="hermes", reasoning_parser="qwen3")) == []
    )
    assert list(parser_problems("f", TARGET, registry, tool_parser="gemma4", reasoning_parser="gemma4")) == []
    [problem] = parser_problems("f", "mistralai/Magistral-Small-2509", {}, reasoning_parser="deepseek_r1")
    assert problem.path == "engine.reasoning_parser" and "mistral" in problem.fix
    # a model whose family cannot be told gets no judgement, even with another family's parser
    assert list(parser_problems("f", "someone/custom-model", {}, tool_parser="gemma4")) == []


def test_an_unknown_parser_is_a_warning() -> None:
    [problem] = parser_problems("f", TARGET, models(), tool_parser="gemma_4")
    assert (problem.rule, problem.severity) == ("parser-unknown", "warning")
    assert "gemma4 suits this model" in problem.fix


def test_calibration_provenance_and_staleness() -> None:
    measured = VllmCalibration(available_kv_cache_gib=2.82)
    [problem] = calibration_problems("a.yaml", TARGET, "img:1", "rtx5090-laptop", measured)
    assert (problem.rule, problem.path) == ("calibration-provenance", "engine.calibration")
    assert "model, image, hardware missing" in problem.message
    measured = VllmCalibration(available_kv_cache_gib=2.82, model=TARGET, image="img:1", hardware="rtx5090")
    [problem] = calibration_problems("a.yaml", TARGET, "img:1", "rtx5090-laptop", measured)
    assert problem.rule == "calibration-stale"
    assert "another hardware: hardware rtx5090 (the spec has rtx5090-laptop)" in problem.message
    assert "olarespack calibrate a.yaml --log boot.log" in problem.fix
    assert list(calibration_problems("a.yaml", TARGET, "img:1", "rtx5090", measured)) == []
    assert list(calibration_problems("a.yaml", TARGET, "img:1", "rtx5090", None)) == []


def test_fit_ignores_a_calibration_of_another_model() -> None:
    from olarespack.spec.load import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "apps" / "gemma4-vision.yaml")
    assert ENGINE.calibration(spec.engine)
    other = spec.engine.model_copy(update={"model": "Qwen/Qwen3-8B-AWQ"})
    assert ENGINE.calibration(other) == {}


def _vision_copy(project: Path, edit: str) -> Path:
    text = (project / "apps" / "gemma4-vision.yaml").read_text(encoding="utf-8")
    if edit == "model":
        text = re.sub(r"(?m)^name: .*$", "name: vllmqwen3eightb", text)
        text = re.sub(r"(?m)^  model: .*$", "  model: Qwen/Qwen3-8B-AWQ", text)
    else:
        text = re.sub(r"(?m)^  speculative:\n(    .*\n)+", "", text)
    path = project / "apps" / f"copy-{edit}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_vision_spec_on_a_qwen_model_fails_lint(project: Path) -> None:
    spec = _vision_copy(project, "model")
    code, output = run_cli(project, "lint", str(spec.relative_to(project)), "--no-helm4")
    assert code == 1
    errors = {
        re.search(r"\[([\w-]+)\]$", line)[1]: line
        for line in output.splitlines()  # type: ignore[index]
        if line.startswith("ERROR ")
    }
    assert set(errors) == {"drafter-target", "parser-family", "calibration-stale"}, output
    assert "apps/copy-model.yaml: engine.speculative: " in errors["drafter-target"]
    assert "apps/copy-model.yaml: engine.tool_call_parser: " in errors["parser-family"]
    assert "apps/copy-model.yaml: engine.calibration: was measured with another model" in errors["calibration-stale"]


def test_with_facts_for_the_new_model_its_context_and_the_rules_are_reported_together(project: Path) -> None:
    """Once `model add` gave facts for the new model, its context is checked too: a context past the model's
    window must not hide the drafter, parser and calibration mistakes until it is fixed."""
    config = project / "config.json"
    config.write_text(
        '{"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36, '
        '"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, '
        '"max_position_embeddings": 40960, "vocab_size": 151936}',
        encoding="utf-8",
    )
    code, output = run_cli(
        project, "model", "add", "Qwen/Qwen3-8B-AWQ", "--config", str(config), "--weights-bytes", "6200000000"
    )
    assert code == 0, output
    spec = _vision_copy(project, "model")
    code, output = run_cli(project, "lint", str(spec.relative_to(project)), "--no-helm4")
    assert code == 1
    rules = {m[1] for m in re.finditer(r"^ERROR .*\[([\w-]+)\]$", output, re.M)}
    assert {"drafter-target", "parser-family", "calibration-stale"} <= rules, output
    assert rules - {"drafter-target", "parser-family", "calibration-stale"}, output  # the context's own error


def test_a_description_citing_a_removed_field_names_file_and_path(project: Path) -> None:
    spec = _vision_copy(project, "nospec")
    code, output = run_cli(project, "lint", str(spec.relative_to(project)), "--no-helm4")
    assert code == 1
    assert (
        "apps/copy-nospec.yaml: metadata.full_description: [[ engine.speculative.model ]] cites "
        "engine.speculative.model, but engine.speculative is not set"
    ) in output
    assert "Traceback" not in output and "has no attribute" not in output
