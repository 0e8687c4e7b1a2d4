"""The real llama-server runs what the llama.cpp apps' charts tell it to run.

For every llama.cpp app, the chart is rendered and read as the pod runs it (helm's output, the container's command
and args after Kubernetes expands $(VAR) from its env), the model paths are swapped for a tiny GGUF of the same
architecture (tests/tiny_gguf.py), host and port for loopback, and the server must answer /health and one
/completion. `make test` builds the CPU servers (tools/engine_releases/llama_server.py) of the build the apps'
images name and of the newest build, and hands their paths over in OLARESPACK_LLAMA_SERVERS; run alone, pytest
skips these tests and says how to build them.

The projector (`--mmproj`) is left out: a Gemma 4 audio projector (`gemma4a`, a Conformer encoder) cannot be
written small here, and with random weights its load-time warmup would prove nothing about the chart. The model,
every other flag and the env of the chart are booted as they are.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import tiny_gguf
from conftest import APP_FILES, run_cli
from olarespack.check.inputs import classify
from olarespack.cli.group import helm_binary
from olarespack.importer import _containers, _documents
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart

SERVERS_ENV = "OLARESPACK_LLAMA_SERVERS"
BUILD_HINT = (
    f"{SERVERS_ENV} is not set: `make test` builds the servers, or run "
    "`python tools/engine_releases/llama_server.py --build N` and set it to the printed paths"
)
HEALTH_TIMEOUT_S = 180  # two shared cores may be compiling beside the server
MODEL_FLAGS = {"-m", "--model"}
DROPPED = {"--mmproj", "-mm"}  # see the module's docstring
LLAMA_APPS = [p for p in APP_FILES if (yaml.safe_load(p.read_text(encoding="utf-8"))["engine"]["kind"] == "llamacpp")]


def given_servers() -> dict[int, Path]:
    """The llama-server binaries `make test` built, by the llama.cpp build each one is."""
    found: dict[int, Path] = {}
    for item in re.split(rf"[\n{re.escape(os.pathsep)}]", os.environ.get(SERVERS_ENV, "")):
        if item.strip():
            binary = Path(item.strip())
            found[server_build(binary)] = binary
    return found


def server_build(binary: Path) -> int:
    """The build the tool recorded beside the binary, else the one `--version` prints."""
    artifact = binary.parent.parent / "artifact.json"
    if artifact.is_file():
        return int(json.loads(artifact.read_text(encoding="utf-8"))["build"])
    shown = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False)
    found = re.search(r"\(build (\d+)", shown.stdout + shown.stderr)
    assert found, f"{binary} --version names no build"
    return int(found.group(1))


def image_build(spec_file: Path) -> int:
    image = str(yaml.safe_load(spec_file.read_text(encoding="utf-8"))["engine"]["image"])
    found = re.search(r"-b(\d+)$", image)
    assert found, f"{spec_file.name}: image {image} names no llama.cpp build"
    return int(found.group(1))


def pod_argv(spec_file: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    """The engine container's command line and env, as the pod runs them: the chart rendered by the real helm
    and read by import's resolver ($(VAR) expanded from the container's env)."""
    folder = out / spec_file.stem
    write_chart(render_chart(load_spec(spec_file), str(spec_file)), folder)
    with ExitStack() as stack:
        _, targets, _ = classify([str(folder)], stack)
        containers, _ = _containers(_documents(targets[0], helm_binary()))
    server = next(c for c in containers if c.kind is not None)
    assert (server.kind, server.resolved.unresolved) == ("llamacpp", []), server.resolved.unresolved
    return server.resolved.argv, dict(server.env.values)


def local_argv(argv: list[str], binary: Path, model: Path, port: int) -> list[str]:
    """The pod's command line on this machine: our binary, the tiny model, loopback, the projector left out."""
    out = [str(binary)]
    items = iter(argv[1:])
    for item in items:
        name = item.split("=", 1)[0]
        if name in DROPPED:
            next(items, None)
        elif name in MODEL_FLAGS:
            next(items, None)
            out += [item, str(model)]
        elif name == "--host":
            next(items, None)
            out += [item, "127.0.0.1"]
        elif name == "--port":
            next(items, None)
            out += [item, str(port)]
        else:
            out.append(item)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Boot:
    code: int | None  # the exit code when the server stopped on its own
    seconds: float  # start to /health answering 200 (or to exit)
    completion: dict[str, object]
    log: str


def _get(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status), bytes(answer.read())
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def boot(argv: list[str], env: dict[str, str], log_file: Path) -> Boot:
    """Start the server, wait for /health, POST one /completion of 4 tokens; always stop it."""
    port = int(argv[argv.index("--port") + 1])
    started = time.monotonic()
    with log_file.open("wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
        try:
            while time.monotonic() - started < HEALTH_TIMEOUT_S:
                if server.poll() is not None:
                    break
                try:
                    if _get(f"http://127.0.0.1:{port}/health")[0] == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            seconds = time.monotonic() - started
            completion: dict[str, object] = {}
            if server.poll() is None:
                body = json.dumps({"prompt": "Hello from the chart", "n_predict": 4}).encode()
                status, text = _get(f"http://127.0.0.1:{port}/completion", body)
                completion = {"status": status, **json.loads(text)}
        finally:
            if server.poll() is None:
                server.terminate()
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
                code = None
            else:
                code = server.returncode
    return Boot(code, seconds, completion, log_file.read_text(encoding="utf-8", errors="replace"))


@pytest.fixture(scope="module")
def servers() -> dict[int, Path]:
    found = given_servers()
    if not found:
        pytest.skip(BUILD_HINT)
    return found


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tiny_gguf.write_gemma4(tmp_path_factory.mktemp("gguf") / "tiny-gemma4.gguf")


def server_of(servers: dict[int, Path], build: int) -> Path:
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among {SERVERS_ENV} ({sorted(servers)}); `make test` builds it")
    return servers[build]


def assert_served(result: Boot) -> None:
    assert result.code is None, f"llama-server exited {result.code}:\n{result.log[-4000:]}"
    assert result.completion.get("status") == 200, result.completion
    assert result.completion.get("tokens_predicted") == 4, result.completion


# --- the tiny model itself ---------------------------------------------------------------------------------------


def test_tiny_gemma4_has_the_e4b_layout(tiny_model: Path) -> None:
    keys = tiny_gguf.gguf_keys(tiny_model)
    assert keys["general.architecture"] == "gemma4"
    assert keys["gemma4.attention.shared_kv_layers"] == 3 and keys["gemma4.block_count"] == 6
    assert keys["gemma4.attention.sliding_window_pattern"] == 6
    assert keys["gemma4.embedding_length_per_layer_input"] == 16
    assert tiny_model.stat().st_size < 2_000_000


@pytest.mark.parametrize(("layers", "period", "shared"), [(6, 3, 2), (6, 3, 6), (3, 3, 0)])
def test_tiny_gemma4_refuses_a_tail_llama_cpp_cannot_map(tmp_path: Path, layers: int, period: int, shared: int) -> None:
    with pytest.raises(ValueError, match=r"KV-shared tail|both a SWA"):
        tiny_gguf.write_gemma4(tmp_path / "x.gguf", n_layer=layers, swa_period=period, n_kv_shared=shared)
    assert not (tmp_path / "x.gguf").exists()


def test_local_argv_swaps_only_what_this_machine_needs() -> None:
    argv = [
        "/app/llama-server",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--model",
        "/models/m.gguf",
        "--mmproj",
        "/models/p.gguf",
        "--mlock",
        "--threads",
        "8",
    ]
    assert local_argv(argv, Path("/b/llama-server"), Path("/t/tiny.gguf"), 9000) == [
        "/b/llama-server", "--host", "127.0.0.1", "--port", "9000", "--model", "/t/tiny.gguf", "--mlock",
        "--threads", "8",
    ]  # fmt: skip


# --- the apps' charts on the real servers ------------------------------------------------------------------------


def test_every_pinned_build_was_built(servers: dict[int, Path]) -> None:
    """A llama.cpp app pinned to a build the Makefile's LLAMA_BUILDS lacks would skip its boot test silently."""
    missing = sorted({image_build(p) for p in LLAMA_APPS} - set(servers))
    assert missing == [], f"no llama-server for b{missing} among {SERVERS_ENV}: add them to LLAMA_BUILDS in Makefile"


@pytest.mark.helm
@pytest.mark.parametrize("spec_file", LLAMA_APPS, ids=lambda p: p.stem)
def test_chart_boots_on_its_pinned_build(
    spec_file: Path, servers: dict[int, Path], tiny_model: Path, tmp_path: Path
) -> None:
    binary = server_of(servers, image_build(spec_file))
    argv, env = pod_argv(spec_file, tmp_path)
    result = boot(local_argv(argv, binary, tiny_model, free_port()), env, tmp_path / "server.log")
    assert_served(result)
    print(f"{spec_file.stem} on b{image_build(spec_file)}: /health in {result.seconds:.1f}s")


@pytest.mark.helm
@pytest.mark.parametrize("spec_file", LLAMA_APPS, ids=lambda p: p.stem)
def test_chart_moved_to_the_newest_build_boots(
    spec_file: Path, servers: dict[int, Path], tiny_model: Path, repo: Path
) -> None:
    newest, pinned = max(servers), image_build(spec_file)
    if newest <= pinned:
        pytest.skip(f"b{newest} is not newer than the image's b{pinned}")
    before, env = pod_argv(spec_file, repo / "before")
    stale = boot(local_argv(before, servers[newest], tiny_model, free_port()), env, repo / "stale.log")
    if "--mlock" in before:
        # --mlock became --load-mode (b10878): the pinned chart cannot run on the newest server as it is
        assert stale.code not in (None, 0), f"b{newest} accepted --mlock"
        assert "invalid argument: --mlock" in stale.log, stale.log[-4000:]
    moved = repo / "apps" / spec_file.name
    code, out = run_cli(repo, "bump", str(moved), "--image", f"server-cuda13-b{newest}")
    assert code == 0, out
    assert image_build(moved) == newest
    argv, env = pod_argv(moved, repo / "after")
    result = boot(local_argv(argv, servers[newest], tiny_model, free_port()), env, repo / "server.log")
    assert_served(result)
    print(f"{spec_file.stem} moved to b{newest}: /health in {result.seconds:.1f}s")
