"""lint's llama.cpp refusals held against the real llama-server of each build: what lint refuses as "llama.cpp
refuses to start", the build's own server refuses (its own words in its log), and the nearest setting lint accepts
comes up, each as the chart renders it (a type written as the build names it). The servers are the CPU builds
`make test` compiles (b9101, the audio app's, and b11434); the model is a tiny dense GGUF
(engines/llamacpp/tiny_gguf.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from olarespack.engines import engine_problems
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.render.plan import plan_chart
from olarespack.spec.load import load_spec
from specs import app_data, write_spec
from test_llama_server_boot import BUILD_HINT, given_servers
from test_serve import free_port, stop

pytestmark = pytest.mark.engine
IMAGE = "ghcr.io/ggml-org/llama.cpp:server-cuda13-b{}"
WAIT_S = 90.0  # two busy cores
LISTENING = ("server is listening", "llama_server: listening on")

# name: (build, the spec's engine changes, lint's rule, the options of the rendered command line the server gets,
#        words of the server's refusal, the engine changes of the nearest setting lint accepts, which it boots)
Case = tuple[int, dict[str, Any], str, tuple[str, ...], str, dict[str, Any]]
CASES: dict[str, Case] = {
    "quantized-v-without-fa-b9101": (
        9101,
        {"flash_attn": "off", "cache_type_v": "q8_0"},
        "quantized-v-cache",
        ("-fa", "--flash-attn", "-ctv", "--cache-type-v"),
        "V cache quantization requires flash_attn",
        {"flash_attn": "on", "cache_type_v": "q8_0"},
    ),
    "quantized-v-without-fa-b11434": (
        11434,
        {"flash_attn": "off", "cache_type_v": "q8_0"},
        "quantized-v-cache",
        ("-fa", "--flash-attn", "-ctv", "--cache-type-v"),
        "quantized V cache requires flash_attn to be enabled",
        {"flash_attn": "on", "cache_type_v": "q8_0"},
    ),
    "unknown-cache-type": (
        11434,
        {"cache_type_k": "q9_9"},
        "llamacpp-cache-type",
        ("-ctk", "--cache-type-k"),
        "q9_9",
        {"cache_type_k": "q8_0"},
    ),
    # b9101's --spec-type takes only the types that need no draft model (its arg.cpp if-chain)
    "mtp-on-b9101": (
        9101,
        {"speculative": {"type": "draft-mtp", "draft_max": 2}},
        "llamacpp-spec-type",
        ("--spec-type",),
        "unknown speculative decoding type without draft model",
        {"speculative": {"type": "ngram_simple"}},  # written as b9101 names it: ngram-simple
    ),
    "unknown-type-on-b11434": (
        11434,
        {"speculative": {"type": "lookahead"}},
        "llamacpp-spec-type",
        ("--spec-type",),
        "lookahead",
        {"speculative": {"type": "ngram-mod"}},
    ),
}


@pytest.fixture(scope="module")
def servers() -> dict[int, Path]:
    found = given_servers()
    if not {9101, 11434} <= set(found):
        pytest.skip(BUILD_HINT)
    return found


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gguf.write_dense(tmp_path_factory.mktemp("model") / "dense.gguf")


def booted(binary: Path, model: Path, flags: list[str], log: Path) -> tuple[bool, str]:
    """(whether the server came up, its log) for `flags` on the tiny model."""
    argv = [str(binary), "-m", str(model), "-c", "512", "--host", "127.0.0.1", "--port", str(free_port()), *flags]
    started = time.monotonic()
    with log.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            while time.monotonic() - started < WAIT_S and server.poll() is None:
                if any(mark in log.read_text(encoding="utf-8", errors="replace") for mark in LISTENING):
                    break
                time.sleep(0.1)
        finally:
            up = server.poll() is None
            if up:
                stop(server, grace=30)
    return up, log.read_text(encoding="utf-8", errors="replace")


def _rendered(
    tmp_path: Path, build: int, changes: dict[str, Any], rule: str, options: tuple[str, ...], name: str
) -> tuple[list[str], list[str]]:
    """(the severities of `rule` lint reports for the audio app so changed, the `options` of its rendered command
    line with their values)."""
    data = app_data("gemma4-audio")
    data["engine"].update(image=IMAGE.format(build), **changes)
    path = write_spec(tmp_path, data, f"{name}.yaml")
    spec = load_spec(path)
    said = [p.severity for p in engine_problems(str(path), spec) if p.rule == rule]
    args = plan_chart(spec, str(path)).effective_args
    flags = [word for at, word in enumerate(args) if word in options or (at and args[at - 1] in options)]
    return said, flags


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_lint_refuses_the_build_refuses_and_what_it_accepts_boots(
    name: str, servers: dict[int, Path], model: Path, tmp_path: Path
) -> None:
    build, changes, rule, options, words, accepted = CASES[name]
    said, flags = _rendered(tmp_path, build, changes, rule, options, "refused")
    assert said == ["error"] and flags, (said, flags)
    up, log = booted(servers[build], model, flags, tmp_path / "refused.log")
    assert not up, f"b{build} boots {flags}, which lint refuses ({rule})"
    assert words in log, log[-2000:]
    said, flags = _rendered(tmp_path, build, accepted, rule, options, "accepted")
    assert "error" not in said and flags, (said, flags)
    up, log = booted(servers[build], model, flags, tmp_path / "accepted.log")
    assert up, f"b{build} refuses {flags}, which lint accepts:\n{log[-2000:]}"
