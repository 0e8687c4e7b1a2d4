"""The bench inside the box: `--job` prints a Job valid against the Kubernetes schemas, `--exec` a kubectl exec
line; both run the same shell loop, which is run here for real (sh and curl against a loopback server), and
`--responses` reads its log into the same figures as a live bench, or refuses a log that is not one."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS, run_cli
from olarespack.bench.inbox import CURL_IMAGE, SCRIPT
from olarespack.bench.run import shipped_prompt
from olarespack.check.kube import schema_errors
from test_bench_client import FakeServer, Handler, metrics, models, vllm_like
from test_downloader_script import shellcheck

VISION, AUDIO = APPS / "gemma4-vision.yaml", APPS / "gemma4-audio.yaml"
APP = "vllmgemma426ba4bvisionone"
needs_curl = pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("sh") is None,
    reason="the loop runs with sh and curl, as in the pod; this machine lacks one",
)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    counts = {"drafted": 0, "accepted": 0}
    routes: dict[str, Handler] = {
        "GET /v1/models": models(),
        "POST /v1/chat/completions": vllm_like(counts),
        "GET /metrics": metrics(counts),
    }
    fake = FakeServer(routes)
    yield fake
    fake.stop()


def job_of(spec: Path, *more: str) -> dict[str, Any]:
    code, out = run_cli(None, "bench", "box", str(spec), "--job", "--user", "alice", *more)
    assert code == 0, out
    return dict(yaml.safe_load(out[: out.index("# then:")] if "# then:" in out else out))


def env_of(document: dict[str, Any]) -> dict[str, str]:
    container = document["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item["value"] for item in container["env"]}


def test_the_job_is_a_valid_kubernetes_job() -> None:
    document = job_of(VISION)
    assert schema_errors(document) == []
    assert document["kind"] == "Job" and document["metadata"]["namespace"] == f"{APP}-alice"
    pod = document["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == CURL_IMAGE and ":" in CURL_IMAGE and "latest" not in CURL_IMAGE
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["command"] == ["sh", "-c", SCRIPT]
    assert document["spec"]["backoffLimit"] == 0 and document["spec"]["activeDeadlineSeconds"] == 7 * 600 + 300
    env = env_of(document)
    assert env["BENCH_URL"] == f"http://{APP}:8000" and env["BENCH_METRICS"] == "/metrics"
    request = json.loads(env["BENCH_REQUEST"])
    assert request == {
        "model": "gemma-4-26b-vision",
        "messages": [{"role": "user", "content": shipped_prompt()}],
        "max_tokens": 2000,
        "temperature": 0.6,
        "top_p": 0.95,
        "stream": False,
    }
    llama = env_of(job_of(AUDIO, "--namespace", "llm"))
    assert llama["BENCH_URL"] == "http://llamacppgemma4audione:8080" and llama["BENCH_METRICS"] == ""


def test_the_loop_passes_shellcheck(tmp_path: Path) -> None:
    checker = shellcheck()
    if checker is None:
        pytest.skip("shellcheck is not installed (the dev extras carry it)")
    script = tmp_path / "loop.sh"
    script.write_text("#!/bin/sh\n" + SCRIPT, encoding="utf-8")
    done = subprocess.run([checker, "--shell=sh", str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout


def _run_loop(env: dict[str, str], url: str) -> str:
    done = subprocess.run(
        ["sh", "-c", SCRIPT],
        env={"PATH": "/usr/bin:/bin", **env, "BENCH_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_curl
def test_the_jobs_loop_runs_and_its_log_gives_the_figures(server: FakeServer, tmp_path: Path) -> None:
    env = env_of(job_of(VISION, "--runs", "3", "--warmups", "1", "--max-tokens", "30"))
    log = tmp_path / "bench.log"
    log.write_text(_run_loop(env, server.url), encoding="utf-8")
    assert log.read_text(encoding="utf-8").splitlines()[-1] == "### end"
    spec = tmp_path / "vision.yaml"
    shutil.copy(VISION, spec)
    code, out = run_cli(
        None, "bench", "run", str(spec), "--responses", str(log), "--json", "--record", "--hardware", "rtx5090-laptop"
    )
    assert code == 0, out
    result = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert [run["tokens"] for run in result["runs"]] == [30, 30, 30] and len(result["warmups"]) == 1
    assert {run["source"] for run in result["runs"]} == {"request"}  # curl cannot time single events
    assert (result["summary"]["drafted"], result["summary"]["accepted"]) == (90, 60)  # the measured runs only
    record = yaml.safe_load(spec.read_text(encoding="utf-8"))["changelog"][0]["bench"]
    assert (record["runs"], record["tokens"], record["tps_source"], record["acceptance"]) == (3, 30, "request", 66.7)


@needs_curl
def test_the_exec_line_quotes_the_same_loop(server: FakeServer, tmp_path: Path) -> None:
    code, out = run_cli(
        None,
        "bench",
        "box",
        str(VISION),
        "--exec",
        "--user",
        "alice",
        "--runs",
        "2",
        "--warmups",
        "0",
        "--max-tokens",
        "12",
    )
    assert code == 0, out
    argv = shlex.split(out[out.index("kubectl exec") : out.index(" > bench.log")])  # the script's lines quoted
    assert argv[:8] == ["kubectl", "exec", "-n", f"{APP}-alice", f"deploy/{APP}", "-c", "vllm", "--"]
    assert argv[-3:] == ["sh", "-c", SCRIPT] and argv[8] == "env"
    env = dict(item.split("=", 1) for item in argv[9:-3])
    assert env["BENCH_URL"] == "http://127.0.0.1:8000"  # loopback in the engine's container: past Envoy
    log = tmp_path / "bench.log"
    log.write_text(_run_loop(env, server.url), encoding="utf-8")
    code, out = run_cli(None, "bench", "run", str(VISION), "--responses", str(log))
    assert code == 0, out
    assert "0 warm-up(s), 2 run(s), not streamed" in out


def _log(responses: list[str], end: bool = True) -> str:
    header = {
        "model": "m",
        "prompt": "space-invaders",
        "max_tokens": 10,
        "temperature": 0.6,
        "top_p": 0.95,
        "warmups": 0,
        "runs": len(responses),
    }
    lines = [f"### olarespack-bench {json.dumps(header)}"]
    for number, body in enumerate(responses, 1):
        lines += [f"### response {number}", body, "### seconds 0.5"]
    return "\n".join(lines + (["### end"] if end else [])) + "\n"


GOOD = json.dumps({"choices": [{"index": 0, "message": {"content": "x"}}], "usage": {"completion_tokens": 10}})


@pytest.mark.parametrize(
    ("log", "said"),
    [
        ("curl: (7) Failed to connect to x port 8000\n", "not a bench log"),
        (_log([GOOD], end=False), "the log has no `### end` line: the loop did not finish"),
        (_log([GOOD, "curl: (7) Failed to connect"]), "response 2: not a JSON answer: 'curl: (7) Failed to connect'"),
        (_log([GOOD]).replace('"runs": 1', '"runs": 2'), "1 timed response(s), numbered [1], for the 2 requests"),
        (_log([GOOD]).replace('"runs": 1', '"runs": -1'), "asks for an impossible bench"),
        (_log([GOOD]).replace("### seconds 0.5", "### seconds soon"), "not followed by curl's `### seconds` line"),
        (_log([json.dumps({"choices": [], "usage": {"completion_tokens": 99}})]), "impossible usage: 99 completion"),
    ],
)
def test_a_log_that_is_not_a_finished_bench_is_refused(tmp_path: Path, log: str, said: str) -> None:
    path = tmp_path / "bench.log"
    path.write_text(log, encoding="utf-8")
    code, out = run_cli(None, "bench", "run", str(VISION), "--responses", str(path))
    assert code == 1 and said in out, out
    assert "Traceback" not in out


def test_usage_mistakes_exit_2() -> None:
    for args in (
        ["box", "--job"],
        ["box", "--url", "http://127.0.0.1:1", "--job"],
        ["box", "--job", "--exec"],
        ["box", "--job", "--user", "a", "--record"],
        ["run"],
        ["run", "--url", "http://127.0.0.1:1", "--job"],
        ["box", "--exec", "--namespace", "x", "--record"],
    ):
        code, out = run_cli(None, "bench", args[0], str(VISION), *args[1:])
        assert code == 2, (args, out)
    code, out = run_cli(None, "bench", "box", "no-such-app", "--job", "--user", "a")
    assert code == 2 and "no such spec file, and no spec in apps/ for that app" in out


def test_an_app_is_found_by_its_name_or_file_stem() -> None:
    for given in (APP, "gemma4-vision"):
        code, out = run_cli(APPS.parent, "bench", "box", given, "--job", "--user", "alice")
        assert code == 0 and f"namespace: {APP}-alice" in out, out


def test_another_prompt_is_sent_and_named_by_its_hash(tmp_path: Path) -> None:
    prompt = tmp_path / "tetris.txt"
    prompt.write_text("Write Tetris in one HTML file.\n", encoding="utf-8")
    env = env_of(job_of(VISION, "--prompt-file", str(prompt)))
    assert json.loads(env["BENCH_REQUEST"])["messages"][0]["content"] == "Write Tetris in one HTML file."
    assert json.loads(env["BENCH_HEADER"])["prompt"].startswith("tetris.txt@")
    prompt.write_bytes(b"x" * (64 * 1024 + 1))
    code, out = run_cli(None, "bench", "box", str(VISION), "--job", "--user", "a", "--prompt-file", str(prompt))
    assert code == 2 and "at most 64 KiB" in out


def test_a_line_separator_inside_an_answer_is_part_of_its_json(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are text inside a JSON string (json.dumps keeps them with ensure_ascii off),
    not the end of the answer's line."""
    body = json.dumps(
        {"choices": [{"index": 0, "message": {"content": "a\u2028b\u2029c\x85d"}}], "usage": {"completion_tokens": 10}},
        ensure_ascii=False,
    )
    path = tmp_path / "bench.log"
    path.write_text(_log([body]), encoding="utf-8")
    code, out = run_cli(None, "bench", "run", str(VISION), "--responses", str(path))
    assert code == 0, out


def test_a_named_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    pipe = tmp_path / "bench.log"
    os.mkfifo(pipe)
    for option in ("--responses", "--prompt-file"):
        code, out = run_cli(
            None,
            "bench",
            "run",
            str(VISION),
            option,
            str(pipe),
            *(("--url", "http://127.0.0.1:9") if option == "--prompt-file" else ()),
        )
        assert code == 2 and "not a regular file" in out, out


@needs_curl
def test_the_pods_gpu_mode_is_read_from_its_container_and_recorded(server: FakeServer, tmp_path: Path) -> None:
    """HAMi gives a GPU container CUDA_DEVICE_GPU_MODE_0 (2: time slicing); the loop logs it and the record keeps
    it; --gpu-mode that says otherwise is refused naming both, and says the mode when the pod does not."""
    env = env_of(job_of(VISION, "--runs", "2", "--warmups", "0", "--max-tokens", "20"))
    log = tmp_path / "bench.log"
    log.write_text(_run_loop({**env, "CUDA_DEVICE_GPU_MODE_0": "2"}, server.url), encoding="utf-8")
    spec = tmp_path / "vision.yaml"
    shutil.copy(VISION, spec)
    code, out = run_cli(None, "bench", "run", str(spec), "--responses", str(log), "--gpu-mode", "exclusive")
    assert code == 1 and "time-slicing mode (CUDA_DEVICE_GPU_MODE_0=2), not exclusive" in out, out
    code, out = run_cli(
        None, "bench", "run", str(spec), "--responses", str(log), "--record", "--hardware", "rtx5090-laptop"
    )
    assert code == 0, out
    assert yaml.safe_load(spec.read_text(encoding="utf-8"))["changelog"][0]["bench"]["gpu_mode"] == "time-slicing"
    log.write_text(_run_loop(env, server.url), encoding="utf-8")  # a Job's container: no GPU, no mode
    assert "### gpu-mode \n" in log.read_text(encoding="utf-8")
    code, out = run_cli(
        None,
        "bench",
        "run",
        str(spec),
        "--responses",
        str(log),
        "--record",
        "--hardware",
        "rtx5090-laptop",
        "--gpu-mode",
        "memory-slicing",
    )
    assert code == 0, out
    assert yaml.safe_load(spec.read_text(encoding="utf-8"))["changelog"][0]["bench"]["gpu_mode"] == "memory-slicing"
