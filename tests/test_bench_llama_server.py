"""`olarespack bench` against the real llama-server (the CPU builds `make test` makes, on a tiny generated GGUF
that drafts for itself): every run's tokens per second is the server's own, as the server's log prints it for
that completion (`eval time = ... ms / N tokens (... tokens per second)`), and the acceptance is the sum of the
drafts the log reports for the measured runs. Run alone, pytest skips these and says how to build the servers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import APPS, run_cli
from olarespack.engines import engine_for
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.spec.load import load_spec
from test_llama_server_boot import BUILD_HINT, HEALTH_TIMEOUT_S, given_servers
from test_serve import free_port, stop

SERVERS = given_servers()
pytestmark = pytest.mark.skipif(not SERVERS, reason=BUILD_HINT)
# the slot's own line for one completion (not llama_perf_context_print's, which counts runs of the warm-up)
EVAL = re.compile(
    r"(?<!prompt )eval time =\s*([\d.]+) ms /\s*(\d+) tokens \(\s*[\d.]+ ms per token,\s*([\d.]+) "
    r"tokens per second\)"
)
DRAFTS = re.compile(r"draft acceptance(?: rate)? = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\)")


ALIAS = "gemma-4-e4b-audio"  # the audio spec's served name, which --record checks against what was measured


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gguf.write_gemma4(tmp_path_factory.mktemp("gguf") / "tiny-gemma4.gguf")


def _boot(binary: Path, model: Path, log: Path, *more: str) -> tuple[subprocess.Popen[bytes], str]:
    """The server with the tiny model drafting for itself (every draft kept for the target to judge)."""
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    typed = ["--spec-type", "draft-simple"] if "draft-simple" in shown.stdout + shown.stderr else []
    port = free_port()
    argv = [
        str(binary),
        "-m",
        str(model),
        "-md",
        str(model),
        *typed,
        "--spec-draft-n-max",
        "4",
        "--spec-draft-p-min",
        "0",
        "-c",
        "4096",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--alias",
        ALIAS,
        *more,
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    while time.monotonic() - started < HEALTH_TIMEOUT_S and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return server, url
        except OSError:
            time.sleep(0.2)
    stop(server)
    raise AssertionError(f"{binary} did not come up: {log.read_text(errors='replace')[-2000:]}")


@pytest.mark.parametrize("build", sorted(SERVERS))
def test_bench_gives_the_servers_own_rates(build: int, tiny: Path, tmp_path: Path) -> None:
    spec = tmp_path / "audio.yaml"
    shutil.copy(APPS / "gemma4-audio.yaml", spec)
    log = tmp_path / "server.log"
    server, url = _boot(SERVERS[build], tiny, log)
    try:
        # a CPU server told the box's hardware, as a record needs (a server does not say where it runs)
        code, out = run_cli(
            None,
            "bench",
            "run",
            str(spec),
            "--url",
            url,
            "--runs",
            "3",
            "--warmups",
            "1",
            "--max-tokens",
            "24",
            "--json",
            "--record",
            "--hardware",
            "rtx5090-laptop",
        )
    finally:
        stop(server, grace=30)
    assert code == 0, out
    result = json.loads(out[out.index("{") : out.rindex("}") + 1])
    text = log.read_text(encoding="utf-8", errors="replace")
    logged = [
        (int(n), float(tps))
        for line in text.splitlines()
        if "llama_perf" not in line
        for _, n, tps in EVAL.findall(line)
    ]
    measured = result["warmups"] + result["runs"]
    assert len(logged) == len(measured) == 4, logged
    for run, (tokens, tps) in zip(measured, logged, strict=True):
        assert run["source"] == "server"
        assert run["tokens"] == tokens
        assert run["tps"] == pytest.approx(tps, abs=0.006)  # the log prints two decimals
    drafts = [(int(a), int(g)) for a, g in DRAFTS.findall(text)]
    assert len(drafts) == 4, drafts
    summary = result["summary"]
    assert (summary["accepted"], summary["drafted"]) == tuple(map(sum, zip(*drafts[1:], strict=True)))
    assert summary["drafted"] > 0 and result["acceptance_source"].startswith("the server's timings of each run")
    # it serves the spec's own model (what --record needs); the tiny model drafts where the spec does not, so the
    # decode bound is not checked, and says so
    assert [note for note in result["notes"] if not note.startswith("warning: ")] == []
    assert "warning: the server drafts, the spec does not: the decode bound was not checked" in result["notes"][0]
    record = yaml.safe_load(spec.read_text(encoding="utf-8"))["changelog"][0]["bench"]
    assert record["series"] == [round(run["tps"], 2) for run in result["runs"]]
    # the release the spec's image names, not the binary's: the record says what the app runs on the box
    assert record["tps_source"] == "server" and record["engine_release"] == engine_for(load_spec(spec).engine).version()


@pytest.mark.parametrize("build", sorted(SERVERS))
def test_a_grid_of_concurrency_and_depth_measures_every_cell(build: int, tiny: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server, url = _boot(SERVERS[build], tiny, log, "-np", "2", "-c", "8192")
    try:
        code, out = run_cli(
            None,
            "bench",
            "grid",
            str(APPS / "gemma4-audio.yaml"),
            "--url",
            url,
            "--concurrency",
            "1,2",
            "--depth",
            "0,512",
            "--runs",
            "1",
            "--warmups",
            "0",
            "--max-tokens",
            "8",
            "--json",
        )
    finally:
        stop(server, grace=30)
    assert code == 0, out
    cells = json.loads(out[out.index("{") : out.rindex("}") + 1])["cells"]
    assert [(c["depth"], c["concurrency"], c["requests"]) for c in cells] == [
        (0, 1, 1),
        (0, 2, 2),
        (512, 1, 1),
        (512, 2, 2),
    ]
    shallow, deep = cells[0]["prompt_tokens"], cells[2]["prompt_tokens"]
    assert deep - shallow >= 256, cells  # the server counted the filler (the tokens its tokenizer made of it)
    assert all(c["ttft_ms"] > 0 and c["tps_per_request"] > 0 and c["tps_total"] > 0 for c in cells)
    assert all(c["tps_source"] == "server" for c in cells)
