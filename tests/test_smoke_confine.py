"""A stranger's chart booted by `olarespack smoke` or the sweep runs what the pod runs, minus what would reach this
machine outside the boot's own folder: env that loads code or changes the interpreter or the loader, options that
load code, reach the network or name files elsewhere. Each is a row of the changes table with its reason; lint
warns on the same env. The quick tests judge rendered charts (real helm); the boot tests start the real engines
with a hostile spec and look for what it would have done."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import APPS, ROOT, run_cli
from olarespack.core.boot_env import code_env, names_a_place, path_words
from olarespack.engines.confine import REFUSED, Swapped, confine, verify
from olarespack.engines.llamacpp.smoke import SMOKE as LLAMA_SMOKE
from olarespack.engines.smoke import ModelFiles, SmokeError
from olarespack.engines.vllm.smoke import SMOKE as VLLM_SMOKE
from olarespack.spec.load import load_spec
from test_smoke import engine_for_app, rendered, smoke_cli


def changes_by_item(confined: object) -> dict[str, object]:
    return {c.item: c for c in confined.changes}  # type: ignore[attr-defined]


# --- the env rules and where they come from --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_AUDIT",
        "LD_LIBRARY_PATH",
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "PYTHONWARNINGS",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "BROWSER",
        "PATH",
        "BASH_ENV",
        "ENV",
        "BASH_FUNC_ls%%",
        "CC",
        "CXX",
        "VLLM_PLUGINS",
        "VLLM_LOGGING_CONFIG_PATH",
        "GGML_BACKEND_PATH",
        "TMPDIR",
    ],
)
def test_env_that_loads_code_is_named_with_its_source(name: str) -> None:
    rule = code_env(name)
    assert rule is not None and rule.why and rule.source


@pytest.mark.parametrize(
    "name",
    [
        "HF_ENDPOINT",
        "GGML_CUDA_GRAPH_OPT",
        "VLLM_USE_V1",
        "CUDA_VISIBLE_DEVICES",
        "SPEC_CONFIG",
        "OMP_NUM_THREADS",
        "LLAMA_ARG_THREADS",
    ],
)
def test_ordinary_env_loads_no_code(name: str) -> None:
    assert code_env(name) is None


def test_places_are_read_from_names_and_values() -> None:
    assert all(
        names_a_place(n)
        for n in (
            "HF_HOME",
            "TRITON_CACHE_DIR",
            "HF_TOKEN_PATH",
            "LLAMA_CACHE",
            "VLLM_CACHE_ROOT",
            "XDG_CONFIG_HOME",
            "NCCL_DEBUG_FILE",
        )
    )
    assert not any(names_a_place(n) for n in ("HF_ENDPOINT", "VLLM_KV_CACHE_LAYOUT", "GGML_CUDA_GRAPH_OPT"))
    assert path_words("https://huggingface.co") == []  # a URL is no path
    assert path_words("a=/etc/x,b") == ["/etc/x"]
    assert "../../y" in path_words("x:../../y") and path_words("~/.ssh") == ["~/.ssh"]
    assert path_words("file:///etc/passwd")


# --- llama-server: its options judged by their value hints and help (the image build's release table) ------------


@pytest.mark.helm
def test_a_llama_charts_hostile_env_and_options_are_refused_or_moved(tmp_path: Path) -> None:
    spec_file = APPS / "gemma4-audio.yaml"
    argv, env = rendered(spec_file, tmp_path)
    engine = load_spec(spec_file).engine
    work = tmp_path / "work"
    work.mkdir()
    files = ModelFiles({"model": work / "m.gguf", "projector": work / "p.gguf"}, real=False)
    hostile_argv = [
        *argv,
        "--log-file",
        "/tmp/overwritten",
        "--grammar-file=/etc/passwd",
        "--tools",
        "all",
        "--lora",
        "../../x.gguf",
        "--hf-repo",
        "someone/model",
        "--chat-template-file",
        "~/.bashrc",
        "--mcp-servers-json",
        "{}",
        "--media-path",
        "/",
        "--slot-save-path",
        "/root",
    ]
    hostile_env = {
        **env,
        "LD_PRELOAD": "/tmp/evil.so",
        "PYTHONWARNINGS": "ignore::antigravity.X",
        "BROWSER": "/tmp/run-me",
        "LLAMA_ARG_MODEL": "/etc/shadow",
        "HF_TOKEN": "hf_x",
        "TRITON_CACHE_DIR": "../../../tmp",
        "GGML_BACKEND_PATH": "/tmp/evil.so",
    }
    confined = confine(
        hostile_argv,
        hostile_env,
        LLAMA_SMOKE.policy(engine),
        LLAMA_SMOKE.swapped(engine, files),
        [work],
        work,
        LLAMA_SMOKE.chart_head,
    )
    items = changes_by_item(confined)
    refused = {item for item, c in items.items() if c.booted == REFUSED}  # type: ignore[attr-defined]
    assert refused == {
        "--grammar-file",
        "--tools",
        "--lora",
        "--hf-repo",
        "--chat-template-file",
        "--mcp-servers-json",
        "--media-path",
        "env LD_PRELOAD",
        "env PYTHONWARNINGS",
        "env BROWSER",
        "env LLAMA_ARG_MODEL (--model)",
        "env HF_TOKEN (--hf-token)",
        "env TRITON_CACHE_DIR",
        "env GGML_BACKEND_PATH",
    }
    # a file the server writes goes into the boot's folder; the chart's own model and address are the boot's
    assert confined.argv[confined.argv.index("--log-file") + 1] == str(work.resolve() / "llama-server-log.txt")
    assert confined.argv[confined.argv.index("--slot-save-path") + 1] == str(work.resolve() / "slots")
    assert "/etc/passwd" not in " ".join(confined.argv) and "all" not in confined.argv
    assert confined.env == env  # the chart's own env (GGML_CUDA_GRAPH_OPT) passes as it is
    assert all(c.why for c in confined.changes)  # type: ignore[attr-defined]
    assert "do not enable in untrusted environments" in items["--tools"].why  # type: ignore[attr-defined]
    assert "ld.so(8)" in items["env LD_PRELOAD"].why  # type: ignore[attr-defined]
    # the shipped chart itself loses nothing
    plain = confine(argv, env, LLAMA_SMOKE.policy(engine), LLAMA_SMOKE.swapped(engine, files), [work], work, 1)
    assert plain.argv == argv and plain.env == env and plain.changes == []


@pytest.mark.helm
def test_the_llama_boot_listens_on_loopback_even_when_the_chart_says_nothing(tmp_path: Path) -> None:
    spec_file = APPS / "gemma4-audio.yaml"
    argv, env = rendered(spec_file, tmp_path)
    engine = load_spec(spec_file).engine
    files = ModelFiles({"model": tmp_path / "m.gguf"}, real=False)
    from olarespack.engines.smoke import Runtime

    runtime = Runtime(Path("/cache/bin/llama-server"), "b9101", "llama-server b9101 (CPU build)")
    bare = [a for i, a in enumerate(argv) if a not in ("--host", "--port") and argv[i - 1] not in ("--host", "--port")]
    booting = LLAMA_SMOKE.booting(engine, [*bare, "--model=/models/x.gguf"], env, runtime, files, 9125, tmp_path)
    at = booting.argv.index("--host")
    assert booting.argv[at + 1] == "127.0.0.1" and booting.argv[booting.argv.index("--port") + 1] == "9125"
    assert str(tmp_path / "m.gguf") in booting.argv and "--model=/models/x.gguf" not in booting.argv


# --- vLLM: the options its documentation says import Python, read files or reach other hosts -------------------


@pytest.mark.helm
def test_a_vllm_charts_hostile_env_and_options_are_refused(tmp_path: Path) -> None:
    spec_file = APPS / "gemma4-vision.yaml"
    argv, env = rendered(spec_file, tmp_path)
    engine = load_spec(spec_file).engine
    work = tmp_path / "work"
    work.mkdir()
    files = ModelFiles({"model": work / "target", "draft": work / "draft"}, real=False)
    hostile_argv = [
        *argv,
        "--middleware",
        "os.system",
        "--compilation-config",
        '{"cache_dir": "/root/.ssh"}',
        "--chat-template",
        "/etc/passwd",
        "-cc.debug_dump_path=/tmp/x",
        "--config",
        "args.yaml",
        "--kv-transfer-config.kv_connector_module_path=antigravity",
        "--lora-modules",
        "a=/etc/x",
        "--tool_parser_plugin",
        "plugin.py",
        "--uds",
        "/tmp/sock",
    ]
    hostile_env = {
        **env,
        "PYTHONWARNINGS": "ignore::antigravity.X",
        "BROWSER": "/tmp/run-me",
        "VLLM_LOGGING_CONFIG_PATH": "logging.json",
        "VLLM_CACHE_ROOT": "/root",
    }
    confined = confine(
        hostile_argv,
        hostile_env,
        VLLM_SMOKE.policy(engine),
        VLLM_SMOKE.swapped(engine, files),
        [work],
        work,
        VLLM_SMOKE.chart_head,
    )
    items = changes_by_item(confined)
    assert set(items) == {
        "--middleware",
        "--compilation-config",
        "--chat-template",
        "-cc.debug_dump_path",
        "--config",
        "--kv-transfer-config.kv_connector_module_path",
        "--lora-modules",
        "--tool_parser_plugin",
        "--uds",
        "env PYTHONWARNINGS",
        "env BROWSER",
        "env VLLM_LOGGING_CONFIG_PATH",
        "env VLLM_CACHE_ROOT",
        "env HF_TOKEN_PATH",
    }
    assert all(c.booted == REFUSED and c.why for c in items.values())  # type: ignore[attr-defined]
    # the chart's own command line passes whole: the model id, the drafter's id and the address are the boot's
    assert confined.argv == argv
    assert confined.env == {k: v for k, v in env.items() if k != "HF_TOKEN_PATH"}
    # a drafter path outside is refused when no local drafter replaces it
    no_draft = ModelFiles({"model": work / "target"}, real=False)
    at = argv.index("--speculative-config") + 1
    away = [*argv[:at], json.dumps({"method": "mtp", "model": "/etc"}), *argv[at + 1 :]]
    judged = confine(away, {}, VLLM_SMOKE.policy(engine), VLLM_SMOKE.swapped(engine, no_draft), [work], work, 3)
    assert "--speculative-config" not in judged.argv and judged.changes[0].item == "--speculative-config"


@pytest.mark.helm
def test_what_boots_is_checked_again_after_the_engines_changes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    verify(
        ["/bin/llama-server", "--model", str(work / "m.gguf"), "--port", "1"], {"HF_HOME": str(work)}, [work], work, 1
    )
    for argv, env in (
        (["/bin/x", "--model", "/etc/passwd"], {}),
        (["/bin/x", "--a=../../y"], {}),
        (["/bin/x"], {"LD_PRELOAD": "x.so"}),
        (["/bin/x"], {"TRITON_CACHE_DIR": "/tmp"}),
    ):
        with pytest.raises(SmokeError, match="outside its folder"):
            verify(argv, env, [work], work, 1)
    assert Swapped().options == frozenset()


# --- lint warns on the same env ----------------------------------------------------------------------------------


@pytest.mark.helm
def test_lint_warns_on_env_that_loads_code(tmp_path: Path) -> None:
    data = yaml.safe_load((APPS / "gemma4-audio.yaml").read_text(encoding="utf-8"))
    data["engine"]["env"] = {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2", "PYTHONWARNINGS": "ignore"}
    spec = tmp_path / "gemma4-audio.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, out = run_cli(tmp_path, "lint", str(spec))
    warned = [line for line in out.splitlines() if "[env-loads-code]" in line]
    assert len(warned) == 2 and all(line.startswith("WARN") for line in warned), out
    assert "engine.env.LD_PRELOAD" in warned[0] and "ld.so(8)" in warned[0]
    assert code == 0, out


# --- the real engines, booted with a hostile spec (the boot tests, last) ------------------------------------------


def hostile_spec(stem: str, folder: Path, env: dict[str, str], extra: list[str]) -> Path:
    data = yaml.safe_load((APPS / f"{stem}.yaml").read_text(encoding="utf-8"))
    data["engine"]["env"] = {**data["engine"].get("env", {}), **env}
    data["engine"]["extra_args"] = [*data["engine"].get("extra_args", []), *extra]
    spec = folder / f"{stem}.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def marker_library(folder: Path, marker: Path) -> Path:
    """A shared library that writes `marker` when a process loads it (what an LD_PRELOAD would run)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler here to build the library an LD_PRELOAD would load")
    source = folder / "marker.c"
    source.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void loaded(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("loaded", f); fclose(f); }}\n}}\n',
        encoding="utf-8",
    )
    library = folder / "marker.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, timeout=120)
    return library


def marker_browser(folder: Path, marker: Path) -> Path:
    """A program Python's webbrowser would run for BROWSER: it writes `marker`."""
    script = folder / "browser.sh"
    script.write_text(f"#!/bin/sh\necho ran > '{marker}'\n", encoding="utf-8")
    script.chmod(0o755)
    return script


@pytest.mark.boot
@pytest.mark.helm
def test_a_hostile_llama_spec_boots_without_its_library_or_its_log_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = engine_for_app("gemma4-audio")
    outside = tmp_path / "outside"
    outside.mkdir()
    marker, kept = outside / "loaded", outside / "precious.txt"
    kept.write_text("keep me\n", encoding="utf-8")
    library = marker_library(outside, marker)
    spec = hostile_spec("gemma4-audio", tmp_path, {"LD_PRELOAD": str(library)}, ["--log-file", str(kept)])
    code, out, _ = smoke_cli(capfd, "--tiny", "--engine", str(engine), "--keep", str(tmp_path / "smoke"), str(spec))
    assert code == 0, out
    assert not marker.exists(), "the chart's LD_PRELOAD was loaded into llama-server"
    assert kept.read_text(encoding="utf-8") == "keep me\n", "the chart's --log-file wrote outside the boot's folder"
    assert f"env LD_PRELOAD: {library} -> {REFUSED}" in out
    log_file = (tmp_path / "smoke").resolve() / "llama-server-log.txt"
    assert f"--log-file: {kept} -> {log_file}" in out and log_file.is_file()


@pytest.mark.boot
@pytest.mark.helm
def test_a_hostile_vllm_spec_runs_no_program_through_pythonwarnings(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = engine_for_app("gemma4-vision")
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "ran"
    browser = marker_browser(outside, marker)
    # the unknown flag ends the boot once vLLM parses its command line, after the interpreter read its env
    spec = hostile_spec(
        "gemma4-vision",
        tmp_path,
        {"PYTHONWARNINGS": "ignore::antigravity.Nothing", "BROWSER": str(browser)},
        ["--no-such-flag"],
    )
    code, out, _ = smoke_cli(capfd, "--tiny", "--engine", str(engine), "--keep", str(tmp_path / "smoke"), str(spec))
    assert code == 1 and "--no-such-flag" in out, out
    assert not marker.exists(), "the chart's PYTHONWARNINGS and BROWSER ran a program"
    assert f"env PYTHONWARNINGS: ignore::antigravity.Nothing -> {REFUSED}" in out
    assert f"env BROWSER: {browser} -> {REFUSED}" in out


@pytest.mark.boot
@pytest.mark.helm
def test_the_sweep_boots_a_hostile_spec_confined_too(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from test_sweep import bench_cli

    engine = engine_for_app("gemma4-audio")
    outside = tmp_path / "outside"
    outside.mkdir()
    marker, kept = outside / "loaded", outside / "precious.txt"
    kept.write_text("keep me\n", encoding="utf-8")
    spec = hostile_spec(
        "gemma4-audio", tmp_path, {"LD_PRELOAD": str(marker_library(outside, marker))}, ["--log-file", str(kept)]
    )
    code, out = bench_cli(
        capfd,
        ROOT,
        "sweep",
        str(spec),
        "engine.threads=1,2",
        "--tiny",
        "--engine",
        str(engine),
        "--runs",
        "1",
        "--warmups",
        "0",
        "--max-tokens",
        "8",
        "--no-stream",
    )
    assert code == 0, out
    assert not marker.exists() and kept.read_text(encoding="utf-8") == "keep me\n"


def test_json_nested_past_its_bounds_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """A 4,096-character extra arg of nested brackets stopped confine with a RecursionError (exit 4)."""
    from olarespack.engines.vllm.boot_policy import flag_policy

    deep = "[" * 2000 + "]" * 2000
    confined = confine(
        ["vllm", "serve", "m", "--hf-overrides", deep, "--seed", "1"],
        {"SOME_JSON": deep},
        flag_policy(),
        Swapped(),
        [tmp_path],
        tmp_path,
        3,
    )
    assert confined.argv == ["vllm", "serve", "m", "--seed", "1"] and confined.env == {}
    assert all("past what a chart writes" in c.why and c.booted == REFUSED for c in confined.changes)
    assert [c.item for c in confined.changes] == ["--hf-overrides", "env SOME_JSON"]
    with pytest.raises(SmokeError, match="nested deeper than"):
        verify(["/bin/x", "--hf-overrides", deep], {}, [tmp_path], tmp_path, 1)


def test_a_negative_number_is_a_value_not_an_option() -> None:
    from olarespack.engines.releases import is_option

    assert [is_option(w) for w in ("-1", "-.5", "-m", "--seed", "-", "value")] == [
        False,
        False,
        True,
        True,
        False,
        False,
    ]
