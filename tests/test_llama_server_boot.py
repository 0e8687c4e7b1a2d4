"""The real llama-server runs what the llama.cpp apps' charts tell it to run.

For every llama.cpp app, the chart is rendered and read as the pod runs it (helm's output, the container's command
and args after Kubernetes expands $(VAR) from its env), the model paths are swapped for a tiny GGUF of the same
architecture (engines/llamacpp/tiny_gguf.py), host and port for loopback, and the server must answer /health and one
/completion. `make test` builds the CPU servers (tools/engine_releases/llama_server.py) of the build the apps'
images name and of the newest build, and hands their paths over in OLARESPACK_LLAMA_SERVERS; run alone, pytest
skips these tests and says how to build them.

The projector is swapped too, for a tiny Gemma 4 audio projector (`gemma4a`, the USM Conformer encoder), and
one /completion carries a second of audio, so the encoder runs. The model, every other flag and the container's
env are booted as the chart gives them, also as the pod runs them: no capability, so `--mlock` can only warn.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import wave
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import APP_FILES, APPS, run_cli
from olarespack.check.inputs import classify
from olarespack.cli.group import helm_binary
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.importer import _containers, rendered_documents
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart
from test_serve import free_port, stop

SERVERS_ENV = "OLARESPACK_LLAMA_SERVERS"
BUILD_HINT = (
    f"{SERVERS_ENV} is not set: `make test` builds the servers, or run "
    "`python tools/engine_releases/llama_server.py --build N` and set it to the printed paths"
)
HEALTH_TIMEOUT_S = 180  # two shared cores may be compiling beside the server
MODEL_FLAGS = {"-m", "--model", "-md", "--model-draft"}  # the drafter, if any, is the tiny model too
PROJECTOR_FLAGS = {"-mm", "--mmproj"}
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
        containers, _ = _containers(rendered_documents(targets[0], helm_binary()))
    server = next(c for c in containers if c.kind is not None)
    assert (server.kind, server.resolved.unresolved) == ("llamacpp", []), server.resolved.unresolved
    return server.resolved.argv, dict(server.env.values)


@dataclass(frozen=True)
class Tiny:
    model: Path
    projector: Path


def local_argv(argv: list[str], binary: Path, tiny: Tiny, port: int) -> list[str]:
    """The pod's command line on this machine: our binary, the tiny files, loopback; the rest as it is."""
    out = [str(binary)]
    items = iter(argv[1:])
    for item in items:
        name = item.split("=", 1)[0]
        if name in PROJECTOR_FLAGS:
            next(items, None)
            out += [item, str(tiny.projector)]
        elif name in MODEL_FLAGS:
            next(items, None)
            out += [item, str(tiny.model)]
        elif name == "--host":
            next(items, None)
            out += [item, "127.0.0.1"]
        elif name == "--port":
            next(items, None)
            out += [item, str(port)]
        else:
            out.append(item)
    return out


@dataclass
class Boot:
    code: int | None  # the exit code when the server stopped on its own
    seconds: float  # start to /health answering 200 (or to exit)
    completion: dict[str, object]
    heard: dict[str, object]  # the completion of a prompt carrying audio, when a projector was loaded
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
            heard: dict[str, object] = {}
            if server.poll() is None:
                completion = _complete(port, "Hello from the chart")
                if any(flag in argv for flag in PROJECTOR_FLAGS):
                    heard = _complete(port, "Transcribe this audio: ", [_noise_wav()])
        finally:
            if server.poll() is None:
                stop(server, grace=30)
                code = None
            else:
                code = server.returncode
    return Boot(code, seconds, completion, heard, log_file.read_text(encoding="utf-8", errors="replace"))


def _complete(port: int, prompt: str, media: list[bytes] | None = None) -> dict[str, object]:
    """POST /completion (not the chat endpoint: its output parser may refuse what random weights write); media
    go in as `multimodal_data`, each at the server's media marker (random per server on newer builds)."""
    body: dict[str, object] = {"prompt": prompt, "n_predict": 4, "seed": 0}
    if media:
        props = json.loads(_get(f"http://127.0.0.1:{port}/props")[1])
        marker = str(props.get("media_marker", "<__media__>"))
        data = [base64.b64encode(m).decode() for m in media]
        body["prompt"] = {"prompt_string": prompt + marker * len(media), "multimodal_data": data}
    status, text = _get(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode())
    return {"status": status, **json.loads(text)}


def _noise_wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    samples = np.random.default_rng(0).normal(0, 3000, int(seconds * rate)).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(samples.tobytes())
    return out.getvalue()


@pytest.fixture(scope="module")
def servers() -> dict[int, Path]:
    found = given_servers()
    if not found:
        pytest.skip(BUILD_HINT)
    return found


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tiny_gguf.write_gemma4(tmp_path_factory.mktemp("gguf") / "tiny-gemma4.gguf")


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> Tiny:
    projector = tiny_gguf.write_gemma4_audio_projector(tiny_model.parent / "tiny-gemma4-audio-mmproj.gguf")
    return Tiny(tiny_model, projector)


def server_of(servers: dict[int, Path], build: int) -> Path:
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among {SERVERS_ENV} ({sorted(servers)}); `make test` builds it")
    return servers[build]


def assert_served(result: Boot) -> None:
    assert result.code is None, f"llama-server exited {result.code}:\n{result.log[-4000:]}"
    assert result.completion.get("status") == 200, result.completion
    assert result.completion.get("tokens_predicted") == 4, result.completion
    if result.heard:
        assert result.heard.get("status") == 200, result.heard
        # the audio became tokens of its own beside the text's
        assert int(str(result.heard["tokens_evaluated"])) > int(str(result.completion["tokens_evaluated"])) + 10


# --- the tiny model itself ---------------------------------------------------------------------------------------


def test_tiny_gemma4_has_the_e4b_layout(tiny_model: Path) -> None:
    keys = tiny_gguf.gguf_keys(tiny_model)
    assert keys["general.architecture"] == "gemma4"
    assert keys["gemma4.attention.shared_kv_layers"] == 3 and keys["gemma4.block_count"] == 6
    assert keys["gemma4.attention.sliding_window_pattern"] == 6
    assert keys["gemma4.embedding_length_per_layer_input"] == 16
    assert tiny_model.stat().st_size < 2_000_000


def test_tiny_audio_projector_matches_the_text_model(tiny: Tiny) -> None:
    keys = tiny_gguf.gguf_keys(tiny.projector)
    assert (keys["general.architecture"], keys["clip.audio.projector_type"]) == ("clip", "gemma4a")
    assert keys["clip.has_audio_encoder"] is True and keys["clip.audio.num_mel_bins"] == 128
    # the embedder writes into the text model's width
    assert keys["clip.audio.projection_dim"] == tiny_gguf.gguf_keys(tiny.model)["gemma4.embedding_length"] == 64


@pytest.mark.parametrize(("layers", "period", "shared"), [(6, 3, 2), (6, 3, 6), (3, 3, 0)])
def test_tiny_gemma4_refuses_a_tail_llama_cpp_cannot_map(tmp_path: Path, layers: int, period: int, shared: int) -> None:
    with pytest.raises(ValueError, match=r"KV-shared tail|both a SWA"):
        tiny_gguf.write_gemma4(tmp_path / "x.gguf", n_layer=layers, swa_period=period, n_kv_shared=shared)
    assert not (tmp_path / "x.gguf").exists()


def test_llama_cpp_asserts_on_a_tail_after_a_swa_layer(
    servers: dict[int, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why write_gemma4 refuses such a layout: the real server aborts on it."""
    monkeypatch.setattr(
        tiny_gguf, "_gemma4_layout", lambda n, period, shared: [(i + 1) % period != 0 for i in range(n)]
    )
    model = tiny_gguf.write_gemma4(tmp_path / "bad.gguf", n_kv_shared=2)  # the tail starts after a SWA layer
    ran = subprocess.run(
        [str(servers[max(servers)]), "-m", str(model), "--host", "127.0.0.1", "--port", str(free_port()), "-c", "512"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode != 0 and "map_layer_ids.find(il_reuse)" in ran.stdout + ran.stderr


def test_local_argv_swaps_the_files_and_the_address_only() -> None:
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
    tiny = Tiny(Path("/t/tiny.gguf"), Path("/t/mmproj.gguf"))
    assert local_argv(argv, Path("/b/llama-server"), tiny, 9000) == [
        "/b/llama-server", "--host", "127.0.0.1", "--port", "9000", "--model", "/t/tiny.gguf",
        "--mmproj", "/t/mmproj.gguf", "--mlock", "--threads", "8",
    ]  # fmt: skip


# --- the apps' charts on the real servers ------------------------------------------------------------------------


def test_every_pinned_build_was_built(servers: dict[int, Path]) -> None:
    """A llama.cpp app pinned to a build the Makefile's LLAMA_BUILDS lacks would skip its boot test silently."""
    missing = sorted({image_build(p) for p in LLAMA_APPS} - set(servers))
    assert missing == [], f"no llama-server for b{missing} among {SERVERS_ENV}: add them to LLAMA_BUILDS in Makefile"


def as_the_pod(argv: list[str]) -> list[str]:
    """`argv` run as the pod runs it: every capability dropped (no CAP_IPC_LOCK) and no locked memory allowed,
    so memory locking can only warn ("failed to mlock") and the server must serve all the same."""
    if not (shutil.which("setpriv") and shutil.which("prlimit")):
        pytest.skip("setpriv and prlimit (util-linux) are not installed")
    return ["prlimit", "--memlock=0:0", "setpriv", "--bounding-set=-all", "--inh-caps=-all", *argv]


@pytest.mark.helm
@pytest.mark.parametrize("spec_file", LLAMA_APPS, ids=lambda p: p.stem)
@pytest.mark.parametrize("capabilities", ["kept", "dropped"])
def test_chart_boots_on_its_pinned_build(
    spec_file: Path, capabilities: str, servers: dict[int, Path], tiny: Tiny, tmp_path: Path
) -> None:
    binary = server_of(servers, image_build(spec_file))
    argv, env = pod_argv(spec_file, tmp_path)
    local = local_argv(argv, binary, tiny, free_port())
    if capabilities == "dropped":
        local = as_the_pod(local)
    result = boot(local, env, tmp_path / "server.log")
    assert_served(result)
    if capabilities == "dropped" and "--mlock" in argv:
        assert "failed to mlock" in result.log
    print(f"{spec_file.stem} on b{image_build(spec_file)} ({capabilities}): /health in {result.seconds:.1f}s")


@pytest.mark.helm
@pytest.mark.parametrize("spec_file", LLAMA_APPS, ids=lambda p: p.stem)
def test_chart_moved_to_the_newest_build_boots(
    spec_file: Path, servers: dict[int, Path], tiny: Tiny, repo: Path
) -> None:
    newest, pinned = max(servers), image_build(spec_file)
    if newest <= pinned:
        pytest.skip(f"b{newest} is not newer than the image's b{pinned}")
    before, env = pod_argv(spec_file, repo / "before")
    stale = boot(local_argv(before, servers[newest], tiny, free_port()), env, repo / "stale.log")
    if "--mlock" in before:
        # --mlock became --load-mode (b10878): the pinned chart cannot run on the newest server as it is
        assert stale.code not in (None, 0), f"b{newest} accepted --mlock"
        assert "invalid argument: --mlock" in stale.log, stale.log[-4000:]
    moved = repo / "apps" / spec_file.name
    # the cuda12 flavour: its CUDA (12.8.1) starts on every Olares driver, which cuda13 past b9538 does not
    code, out = run_cli(repo, "bump", str(moved), "--image", f"server-cuda12-b{newest}")
    assert code == 0, out
    assert image_build(moved) == newest
    argv, env = pod_argv(moved, repo / "after")
    result = boot(as_the_pod(local_argv(argv, servers[newest], tiny, free_port())), env, repo / "server.log")
    assert_served(result)
    if "mmap+mlock" in argv:
        assert "failed to mlock" in result.log
    print(f"{spec_file.stem} moved to b{newest}: /health in {result.seconds:.1f}s")


@pytest.mark.helm
@pytest.mark.parametrize("build", [9101, 11434])
def test_a_chart_with_draft_bounds_boots(build: int, servers: dict[int, Path], tiny: Tiny, tmp_path: Path) -> None:
    """Speculative decoding with a draft model and its bounds, rendered for each build: --spec-type as the build
    names it, --spec-draft-n-max / --spec-draft-n-min (every mainline build from b9101 refuses --draft-max)."""
    binary = server_of(servers, build)
    data = yaml.safe_load((APPS / "gemma4-audio.yaml").read_text(encoding="utf-8"))
    data["engine"]["image"] = f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}"
    data["engine"]["mlock"] = False
    data["engine"]["speculative"] = {
        "type": "draft",
        "draft_max": 4,
        "draft_min": 1,
        "drafter": {"repo": "unsloth/gemma-4-E4B-it-GGUF", "file": "drafter.gguf"},
    }
    spec_file = tmp_path / "drafted.yaml"
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    argv, env = pod_argv(spec_file, tmp_path)
    assert argv[argv.index("--spec-draft-n-max") + 1] == "4" and argv[argv.index("--spec-draft-n-min") + 1] == "1"
    result = boot(local_argv(argv, binary, tiny, free_port()), env, tmp_path / "server.log")
    assert_served(result)
