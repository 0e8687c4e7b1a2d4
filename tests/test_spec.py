from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import APP_FILES, APPS, spec_version
from olarespack.core.errors import Problem, SpecError
from olarespack.engines.llamacpp import LlamaCppEngine
from olarespack.engines.vllm import VllmEngine
from olarespack.spec.load import load_spec
from specs import app_data, write_spec


def problems_for(tmp_path: Path, data: dict[str, Any]) -> list[Problem]:
    path = write_spec(tmp_path, data)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    for problem in caught.value.problems:
        assert problem.file == str(path)
    return caught.value.problems


def paths(problems: list[Problem]) -> list[str]:
    return [p.path for p in problems]


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: p.stem)
def test_committed_apps_load(path: Path) -> None:
    spec = load_spec(path)
    assert spec.changelog[0].version == spec.version


def test_seed_apps_carry_the_seed_settings() -> None:
    vision = load_spec(APPS / "gemma4-vision.yaml")
    assert isinstance(vision.engine, VllmEngine)
    # published above the author's 1.0.5, 1.0.4 and 1.0.0, so boxes that run those are offered the upgrade
    assert (vision.name, vision.version) == ("vllmgemma426ba4bvisionone", spec_version("gemma4-vision"))
    assert vision.engine.speculative is not None
    assert vision.engine.speculative.method == "mtp"  # the seed's gemma4_mtp, by the name vLLM runs it under
    dflash = load_spec(APPS / "gemma4-dflash.yaml")
    assert isinstance(dflash.engine, VllmEngine) and dflash.engine.speculative is not None
    assert (dflash.version, dflash.engine.speculative.num_speculative_tokens) == ("1.1.3", 8)
    audio = load_spec(APPS / "gemma4-audio.yaml")
    assert isinstance(audio.engine, LlamaCppEngine)
    assert audio.engine.model.mmproj == "mmproj-BF16.gguf" and audio.version == spec_version("gemma4-audio")


def test_unknown_key_names_the_path_and_suggests_the_spelling(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["max_model_length"] = data["engine"].pop("max_model_len")
    problems = problems_for(tmp_path, data)
    by_path = {p.path: p for p in problems}
    assert "engine.max_model_length" in by_path
    assert by_path["engine.max_model_length"].message == "unknown key"
    assert "max_model_len" in by_path["engine.max_model_length"].fix
    assert by_path["engine.max_model_len"].message == "Field required"


def test_unknown_nested_key(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["speculative"]["num_spec_tokens"] = 3
    problems = problems_for(tmp_path, data)
    assert "engine.speculative.num_spec_tokens" in paths(problems)


def test_wrong_type(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["max_model_len"] = "131072"
    problems = problems_for(tmp_path, data)
    assert paths(problems) == ["engine.max_model_len"]
    assert "whole number" in problems[0].fix


def test_out_of_range(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["gpu_memory_utilization"] = 1.2
    data["engine"]["speculative"]["num_speculative_tokens"] = 0
    assert paths(problems_for(tmp_path, data)) == [
        "engine.gpu_memory_utilization",
        "engine.speculative.num_speculative_tokens",
    ]


def test_missing_field(tmp_path: Path) -> None:
    data = app_data()
    del data["metadata"]["icon"]
    problems = problems_for(tmp_path, data)
    assert paths(problems) == ["metadata.icon"]
    assert problems[0].fix == "add `icon`"


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    data = app_data()
    data["name"] = "Not-Valid"
    data["metadata"]["title"] = "A title that is far longer than thirty characters"
    data["engine"]["kind"] = "vllm"
    data["engine"]["kv_cache_dtype"] = "FP4"  # a dtype name is lower case (the release table judges the rest)
    assert paths(problems_for(tmp_path, data)) == ["engine.kv_cache_dtype", "metadata.title", "name"]


def test_engine_kind_must_be_known(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["kind"] = "sglang"
    problems = problems_for(tmp_path, data)
    assert paths(problems) == ["engine"]
    assert "vllm or llamacpp" in problems[0].fix


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nengine:\n  kind: vllm\n   image: bad-indent\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    [problem] = caught.value.problems
    assert problem.rule == "yaml"
    assert problem.path.startswith("line 4")


def test_duplicate_yaml_keys_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nname: b\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.problems[0].rule == "yaml"


def test_a_spec_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        load_spec(path)


def test_yaml_1_1_booleans_stay_strings(tmp_path: Path) -> None:
    data = app_data("gemma4-audio")
    path = write_spec(tmp_path, data)
    text = path.read_text(encoding="utf-8").replace("flash_attn: 'on'", "flash_attn: on")
    assert "flash_attn: on\n" in text
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    assert isinstance(spec.engine, LlamaCppEngine) and spec.engine.flash_attn == "on"


@pytest.mark.parametrize("version", ["v1.0.5", "1.0", "1.0.5.1", "01.0.5"])
def test_versions_are_strict_semver(tmp_path: Path, version: str) -> None:
    data = app_data()
    data["version"] = version
    data["changelog"][0]["version"] = version
    assert "version" in paths(problems_for(tmp_path, data))


def test_version_must_match_the_newest_changelog_entry(tmp_path: Path) -> None:
    data = app_data()
    data["version"] = "1.0.6"
    problems = problems_for(tmp_path, data)
    assert paths(problems) == ["changelog[0].version"]
    assert "1.0.6" in problems[0].fix


def test_changelog_is_newest_first(tmp_path: Path) -> None:
    data = app_data()
    data["changelog"][1], data["changelog"][2] = data["changelog"][2], data["changelog"][1]
    assert paths(problems_for(tmp_path, data)) == ["changelog[2].version"]


def test_reserved_app_name(tmp_path: Path) -> None:
    data = app_data()
    data["name"] = "kubernetes"
    assert paths(problems_for(tmp_path, data)) == ["name"]


@pytest.mark.parametrize(("key", "value"), [("HF_TOKEN", "abc"), ("MY_SECRET", "x"), ("OTHER", "hf_abcdef")])
def test_credentials_typed_in_clear_are_refused(tmp_path: Path, key: str, value: str) -> None:
    data = app_data()
    data["engine"]["env"] = {key: value}
    problems = problems_for(tmp_path, data)
    assert [(p.path, p.rule) for p in problems] == [(f"engine.env.{key}", "secret-in-clear")]


def test_chart_owned_env_is_refused(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["env"] = {"HF_HOME": "/tmp"}
    assert paths(problems_for(tmp_path, data)) == ["engine.env.HF_HOME"]


def test_limits_below_requests(tmp_path: Path) -> None:
    data = app_data()
    data["resources"]["memory"] = {"request": "48Gi", "limit": "40Gi"}
    assert paths(problems_for(tmp_path, data)) == ["resources.memory.limit"]


def test_gpu_memory_above_the_device(tmp_path: Path) -> None:
    data = app_data()
    data["resources"]["gpu_memory"] = {"request": "32Gi", "limit": "32Gi"}
    problems = problems_for(tmp_path, data)
    assert [(p.path, p.rule) for p in problems] == [("resources.gpu_memory.request", "gpu-memory-device")]
    assert "24463Mi" in problems[0].fix  # what HAMi registers for the card, Olares' install check


def test_gpu_memory_is_booked_whole(tmp_path: Path) -> None:
    data = app_data()
    data["resources"]["gpu_memory"] = {"request": "8Gi", "limit": "12Gi"}
    problems = problems_for(tmp_path, data)
    assert [(p.path, p.rule) for p in problems] == [("resources.gpu_memory.limit", "gpu-memory-booking")]


def test_helm_template_markers_in_text_are_refused(tmp_path: Path) -> None:
    data = app_data()
    data["metadata"]["description"] = "uses {{ .Values.x }}"
    assert paths(problems_for(tmp_path, data)) == ["metadata.description"]


def test_unknown_hardware_profile(tmp_path: Path) -> None:
    data = app_data()
    data["hardware"] = "rtx4090"
    problems = problems_for(tmp_path, data)
    assert paths(problems) == ["hardware"]
    assert "rtx5090-laptop" in problems[0].message
