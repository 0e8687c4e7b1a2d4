from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import pytest
import semver
import yaml

from conftest import APPS, shared
from olarespack.core.errors import RenderError, SpecError, UsageError
from olarespack.engines.base import Arg
from olarespack.olares.generations import generation_for_olares
from olarespack.render import render_chart
from olarespack.render.jinja import helm_scalar, make_env, yaml_block
from olarespack.render.plan import plan_chart
from olarespack.spec.load import load_spec
from olarespack.spec.models import AppSpec
from specs import app_data, write_spec

# The vision app's engine configuration as the second seed post ships it (v1.0.5) on top of the
# author's v1.0.2 chart: what the vLLM process must receive, typed here independently of the spec.
SEED_VISION_ARGS = [
    "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
    "--served-model-name",
    "gemma-4-26b-vision",
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
    "--max-model-len",
    "131072",
    "--gpu-memory-utilization",
    "0.94",
    "--max-num-seqs",
    "4",
    "--max-num-batched-tokens",
    "8192",
    "--attention-backend",
    "triton_attn",
    "--speculative-config",
    # the spec says mtp (vLLM's name; gemma4_mtp is a deprecated alias of it), and the chart writes what it says
    '{"model":"google/gemma-4-26B-A4B-it-assistant","method":"mtp","num_speculative_tokens":3}',
    "--kv-cache-dtype",
    "fp8",
    "--dtype",
    "auto",
    "--trust-remote-code",
    "--download-dir",
    "/models/huggingface",
    "--enable-prefix-caching",
    "--limit-mm-per-prompt",
    '{"image":1}',
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "gemma4",
]


def load(name: str) -> AppSpec:
    return load_spec(APPS / f"{name}.yaml")


def as_pairs(args: list[str]) -> dict[str, object]:
    """Flag -> value (JSON values compared as data, so key order inside JSON does not matter)."""
    pairs: dict[str, object] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
            pairs[flag] = json.loads(value) if value.startswith("{") else value
            i += 2
        else:
            pairs[flag] = True
            i += 1
    return pairs


def test_vision_effective_args_are_the_seed_configuration() -> None:
    plan = plan_chart(load("gemma4-vision"), "apps/gemma4-vision.yaml")
    assert plan.command == ["vllm", "serve"]
    assert plan.effective_args[0] == SEED_VISION_ARGS[0]
    assert as_pairs(plan.effective_args[1:]) == as_pairs(SEED_VISION_ARGS[1:])
    assert [a for a in plan.effective_args if a.startswith("--")] == [a for a in SEED_VISION_ARGS if a.startswith("--")]


def test_container_args_are_the_effective_args() -> None:
    plan = plan_chart(load("gemma4-dflash"), "apps/gemma4-dflash.yaml")
    # the speculative config travels in SPEC_CONFIG (the seed charts' name); every other arg is as run
    at = plan.args.index("--speculative-config") + 1
    assert plan.args[at] == "$(SPEC_CONFIG)"
    assert plan.args[:at] + plan.args[at + 1 :] == plan.effective_args[:at] + plan.effective_args[at + 1 :]
    assert dict(plan.container_env)["SPEC_CONFIG"] == plan.effective_args[at]
    spec_config = plan.effective_args[plan.effective_args.index("--speculative-config") + 1]
    assert json.loads(spec_config) == {
        "method": "dflash",
        "model": "z-lab/gemma-4-26B-A4B-it-DFlash",
        "num_speculative_tokens": 8,
    }
    assert plan.effective_args[plan.effective_args.index("--max-model-len") + 1] == "16384"


def test_literal_dollar_parens_in_extra_args_are_escaped() -> None:
    [arg] = [Arg(value="--x=$(NOT_A_VAR)")]
    assert arg.container_items() == ["--x=$$(NOT_A_VAR)"]
    assert arg.effective_items() == ["--x=$(NOT_A_VAR)"]


def test_llamacpp_args_and_downloads() -> None:
    plan = plan_chart(load("gemma4-audio"), "apps/gemma4-audio.yaml")
    pairs = as_pairs(plan.effective_args)
    # where the installed 1.0.0 chart saved the files, the projector under its own name
    assert pairs["--model"] == "/models/gemma-4-E4B-it-Q4_K_M.gguf"
    assert pairs["--mmproj"] == "/models/gemma-4-E4B-it-mmproj-BF16.gguf"
    assert (pairs["--ctx-size"], pairs["--n-gpu-layers"], pairs["--flash-attn"]) == ("32768", "99", "on")
    assert pairs["--jinja"] is True and pairs["--no-context-shift"] is True and pairs["--mlock"] is True
    assert plan.extra["files"] == [
        ("gemma-4-E4B-it-Q4_K_M.gguf", "/models/gemma-4-E4B-it-Q4_K_M.gguf"),
        ("mmproj-BF16.gguf", "/models/gemma-4-E4B-it-mmproj-BF16.gguf"),
    ]


def _quoted_after(text: str, flag: str) -> str:
    """The argument after `flag` in a container's args list, as a chart file writes it."""
    found = re.search(rf'- "?{re.escape(flag)}"?\n\s*- "?([^"\n]+)"?', text)
    assert found, flag
    return found.group(1)


@pytest.mark.parametrize("stem", ["gemma4-vision", "gemma4-dflash", "gemma4-audio"])
def test_an_upgrade_from_the_authors_chart_finds_its_model_files(stem: str) -> None:
    """The author's installed charts (../shared/reference/seed-market): ours are offered above their
    version, and read the models from the same host folder and paths, so an upgrade downloads nothing."""
    spec = load(stem)
    author = shared("reference/seed-market") / spec.name
    assert semver.Version.parse(spec.version) > semver.Version.parse(
        str(yaml.safe_load((author / "Chart.yaml").read_text(encoding="utf-8"))["version"])
    )
    theirs = (author / "templates/deployment.yaml").read_text(encoding="utf-8")
    ours = render_chart(spec, "x")["templates/deployment.yaml"]
    host = re.compile(r'path: "(\{\{ \.Values\.userspace\.appData \}\}[^"]*)"')
    # ours says what to do where Olares gave no userspace (plain helm): the path is the same where it did
    unguarded = re.sub(r"\{\{ if \.Values\.userspace \}\}(.*?)\{\{ else \}\}.*?\{\{ end \}\}", r"\1", ours)
    assert host.findall(unguarded) == host.findall(theirs)
    if "--download-dir" in theirs:
        assert _quoted_after(ours, "--download-dir") == _quoted_after(theirs, "--download-dir")
    else:
        values = dict(re.findall(r'^  ([A-Z_]+): "([^"]*)"', theirs, re.M))  # the author's ConfigMap
        assert _quoted_after(ours, "--model") == f"/models/{values['MODEL_FILE']}"
        assert _quoted_after(ours, "--mmproj") == f"/models/{values['MMPROJ_FILE']}"


def test_gguf_files_default_to_a_folder_per_repository(tmp_path: Path) -> None:
    data = app_data("gemma4-audio")
    del data["engine"]["model"]["folder"], data["engine"]["model"]["saved_as"]
    plan = plan_chart(load_spec(write_spec(tmp_path, data)), "app.yaml")
    assert as_pairs(plan.effective_args)["--mmproj"] == "/models/unsloth--gemma-4-E4B-it-GGUF/mmproj-BF16.gguf"


def test_render_is_deterministic() -> None:
    spec = load("gemma4-vision")
    assert render_chart(spec, "a") == render_chart(spec, "a")


def test_chart_files() -> None:
    chart = render_chart(load("gemma4-vision"), "apps/gemma4-vision.yaml")
    assert sorted(chart) == [
        ".helmignore",
        "Chart.yaml",
        "OlaresManifest.yaml",
        "i18n/en-US/OlaresManifest.yaml",
        "i18n/fr-FR/OlaresManifest.yaml",
        "owners",
        "templates/deployment.yaml",
        "templates/secret.yaml",
        "templates/service.yaml",
        "values.yaml",
    ]


def test_versions_agree_everywhere() -> None:
    chart = render_chart(load("gemma4-vision"), "x")
    chart_yaml = yaml.safe_load(chart["Chart.yaml"])
    manifest = yaml.safe_load(chart["OlaresManifest.yaml"])
    assert chart_yaml["version"] == chart_yaml["appVersion"] == "1.2.3"
    assert manifest["metadata"]["version"] == manifest["spec"]["versionName"] == "1.2.3"
    assert manifest["spec"]["upgradeDescription"].startswith("v1.2.3: ")
    entries = re.findall(r"^v(\d+\.\d+\.\d+): ", manifest["spec"]["upgradeDescription"], re.M)
    assert entries == ["1.2.3", "1.2.2", "1.2.1", "1.2.0", "1.1.0", "1.0.5", "1.0.2", "1.0.1", "1.0.0"]


@pytest.mark.parametrize(
    ("field", "value", "replacements"),
    [
        # 128K in the one-line description is derived from the context length
        (("engine", "max_model_len"), 65536, [("131072", "65536"), ("128K", "64K")]),
        (("engine", "speculative", "num_speculative_tokens"), 5, [("3", "5")]),
        (("engine", "max_num_batched_tokens"), 4096, [("8192", "4096")]),
    ],
)
def test_one_number_changes_everywhere_and_nowhere_else(
    tmp_path: Path, field: tuple[str, ...], value: int, replacements: list[tuple[str, str]]
) -> None:
    base = render_chart(load("gemma4-vision"), "x")
    data = app_data()
    target = data
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    changed = render_chart(load_spec(write_spec(tmp_path, data)), "x")
    changed_files = set()
    for path in base:
        before, after = base[path].splitlines(), changed[path].splitlines()
        assert len(before) == len(after), path
        for line_before, line_after in zip(before, after, strict=True):
            if line_before != line_after:
                changed_files.add(path)
                expected = line_before
                for old, new in replacements:
                    expected = re.sub(rf"(?<![0-9.]){re.escape(old)}(?![0-9])", new, expected)
                assert expected == line_after, (path, line_before, line_after)
    # the args and the manifest texts that cite the value all follow
    assert {"OlaresManifest.yaml", "i18n/en-US/OlaresManifest.yaml", "templates/deployment.yaml"} <= changed_files

    # history is not rewritten: the changelog still says what was true at each release
    def history(chart: dict[str, str]) -> object:
        return yaml.safe_load(chart["OlaresManifest.yaml"])["spec"]["upgradeDescription"]

    assert history(base) == history(changed)


def test_both_generations_from_one_spec() -> None:
    spec = load("gemma4-vision")
    current = yaml.safe_load(render_chart(spec, "x", "current")["OlaresManifest.yaml"])
    legacy = yaml.safe_load(render_chart(spec, "x", "legacy")["OlaresManifest.yaml"])
    assert (current["olaresManifest.version"], current["apiVersion"]) == ("0.12.0", "v3")
    # v1, the single-chart format: Olares' linter refuses v2 without spec.subCharts
    assert (legacy["olaresManifest.version"], legacy["apiVersion"]) == ("0.10.0", "v1")
    assert current["workloadReplicas"] == {"vllmgemma426ba4bvisionone": 1}
    assert "workloadReplicas" not in legacy
    [nvidia] = current["spec"]["accelerator"]
    assert nvidia["mode"] == "nvidia" and nvidia["requiredGPUMemory"] == nvidia["limitedGPUMemory"] == "24000Mi"
    assert "requiredCpu" not in current["spec"] and "accelerator" not in legacy["spec"]
    assert legacy["spec"]["requiredGpu"] == legacy["spec"]["limitedGpu"] == "24000Mi"
    assert current["options"]["dependencies"][0]["version"] == ">=1.12.6-0"
    assert legacy["options"]["dependencies"][0]["version"] == ">=1.12.3-0,<1.12.6"  # never on 1.12.6
    assert [e["valueFrom"]["envName"] for e in current["envs"]] == [
        "OLARES_SYSTEM_HUGGINGFACE_SERVICE",
        "OLARES_SYSTEM_HUGGINGFACE_TOKEN",
    ]
    assert "OLARES_USER" not in "".join(render_chart(spec, "x", "current").values())


def test_spec_can_choose_the_legacy_generation(tmp_path: Path) -> None:
    data = app_data()
    data["olares"] = {"generation": "legacy"}
    chart = render_chart(load_spec(write_spec(tmp_path, data)), "x")
    assert "olaresManifest.version: '0.10.0'" in chart["OlaresManifest.yaml"]
    assert 'value: "24000m"' in chart["templates/deployment.yaml"]


@pytest.mark.parametrize(
    ("version", "generation"),
    [
        ("1.12.3", "legacy"),
        ("1.12.5", "legacy"),
        ("1.12.6", "current"),
        ("1.13.0", "current"),
        ("1.12.6-rc.1", "legacy"),
    ],
)
def test_generation_for_olares(version: str, generation: str) -> None:
    assert generation_for_olares(version) == generation


@pytest.mark.parametrize("version", ["1.12.2", "latest", "1.x"])
def test_generation_for_olares_refuses(version: str) -> None:
    with pytest.raises(UsageError):
        generation_for_olares(version)


def test_descriptions_cite_the_spec() -> None:
    chart = render_chart(load("gemma4-dflash"), "x")
    manifest = yaml.safe_load(chart["OlaresManifest.yaml"])
    full = manifest["spec"]["fullDescription"]
    assert "num_speculative_tokens=8" in full and "num_speculative_tokens=13" not in full
    assert "n_spec 8" in manifest["metadata"]["description"]
    assert "[[" not in full


def test_a_description_citing_a_missing_field_names_it(tmp_path: Path) -> None:
    data = app_data()
    data["metadata"]["full_description"] = "context [[ engine.max_context ]]"
    with pytest.raises(RenderError) as caught:
        render_chart(load_spec(write_spec(tmp_path, data)), "app.yaml")
    [problem] = caught.value.problems
    assert (problem.file, problem.path) == ("app.yaml", "metadata.full_description")
    assert "max_context" in problem.message


def test_locales_fall_back_to_the_default_texts() -> None:
    chart = render_chart(load("gemma4-vision"), "x")
    fr = yaml.safe_load(chart["i18n/fr-FR/OlaresManifest.yaml"])
    en = yaml.safe_load(chart["i18n/en-US/OlaresManifest.yaml"])
    assert fr["metadata"]["title"] == en["metadata"]["title"]
    assert fr["metadata"]["description"].startswith("Gemma 4 26B-A4B avec vision")
    assert "131072 tokens" in fr["spec"]["fullDescription"]
    assert fr["spec"]["upgradeDescription"] == en["spec"]["upgradeDescription"]


def test_template_markers_outside_descriptions_are_refused_at_load(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["extra_args"] = ["--x=[[y]]"]
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, data))
    assert [(p.path, p.rule) for p in caught.value.problems] == [("engine.extra_args[0]", "template-marker")]


def test_jinja_markers_that_survive_are_caught(tmp_path: Path) -> None:
    data = app_data()
    data["metadata"]["full_description"] = "Cited: [[ metadata.description ]]"  # a text holding a citation
    with pytest.raises(RenderError, match="survived rendering"):
        render_chart(load_spec(write_spec(tmp_path, data)), "app.yaml")


def test_env_uses_strict_undefined_and_custom_delimiters() -> None:
    env = make_env(jinja2.DictLoader({"t": "{{ keep }} [[ value ]]"}))
    assert env.get_template("t").render(value=1) == "{{ keep }} 1"
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("t").render()


@pytest.mark.parametrize("text", ['{"a":{"b":1}}', "say {{ hi }}", 'quote " and \\ back', "yes", "0755", "é"])
def test_scalars_read_back_unchanged(text: str) -> None:
    rendered = helm_scalar(text)
    if rendered.startswith("{{"):
        assert rendered == '{{ "say {{ hi }}" | quote }}'
    else:
        assert yaml.safe_load(f"k: {rendered}")["k"] == text


@pytest.mark.parametrize("text", ["line one\n\n  indented\nlast", "  leading space", "tab\there", "a: b\n- c"])
def test_blocks_read_back(text: str) -> None:
    rendered = yaml_block(text, 2)
    assert yaml.safe_load(f"k: {rendered}\n")["k"] == text.strip("\n") + "\n"
