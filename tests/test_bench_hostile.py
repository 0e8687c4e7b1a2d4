"""`olarespack bench` against hostile servers and inputs (issue 27): an echoed API key is masked whatever its
length, deep or huge-numbered JSON is refused naming the server or file, inputs (the URL, the prompt's name, the
plot path, the hardware) are checked before the first request, a refusal after a live bench prints the result
first, figures no GPU can reach and counters that contradict each other are refused, server text prints as
text, and a /metrics cut short says so. Each refusal exits 1 (2 for usage) with a message, never 4."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS, run_cli
from test_bench_client import METRICS, FakeServer, Handler, chunk, event, fake, metrics, models, send, sse, vllm_like

__all__ = ["fake"]  # the fixture, shared with test_bench_client
DFLASH = APPS / "gemma4-dflash.yaml"  # vLLM, DFlash with 8 drafted tokens a step, an MoE of 128 experts (top 8)
DFLASH_SERVED = "gemma-4-26b-a4b-dflash"
AUDIO = APPS / "gemma4-audio.yaml"  # llama.cpp, no drafting
AUDIO_SERVED = "gemma-4-e4b-audio"
FAST = ("--runs", "2", "--warmups", "0", "--max-tokens", "30")


def _copy(tmp_path: Path, spec: Path = DFLASH) -> Path:
    (tmp_path / "apps").mkdir(exist_ok=True)
    target = tmp_path / "apps" / spec.name
    shutil.copy(spec, target)
    return target


def _vllm(fake: Callable[..., FakeServer], served: str = DFLASH_SERVED, **more: Handler) -> FakeServer:
    counts = {"drafted": 0, "accepted": 0}
    return fake(
        {
            "GET /v1/models": models(served),
            "POST /v1/chat/completions": vllm_like(counts),
            "GET /metrics": metrics(counts),
            **more,
        }
    )


def _llama(timings: dict[str, Any]) -> Handler:
    """llama-server's non-streamed shape, with the timings a test gives."""

    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        tokens = int(body["max_tokens"])
        choice = {"index": 0, "message": {"content": "x"}, "finish_reason": "length"}
        send(
            handler,
            200,
            json.dumps(
                {
                    "choices": [choice],
                    "usage": {"completion_tokens": tokens, "prompt_tokens": 10},
                    "timings": {"predicted_n": tokens, **timings},
                }
            ).encode(),
        )

    return answer


def _clean(out: str) -> None:
    assert "internal error" not in out and "Traceback" not in out, out


# ------------------------------------------------------------------------------------------ 1. the API key


@pytest.mark.parametrize("key", ["Zq7", 'k3y-w1th-sp4ces and "quotes"', "x" * 40])
def test_an_echoed_api_key_is_masked_whatever_its_length(fake: Callable[..., FakeServer], key: str) -> None:
    def echo(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        send(handler, 400, f"bad request, you sent {handler.headers['Authorization']}".encode(), "text/plain")

    def echo_models(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        said = handler.headers["Authorization"]
        send(handler, 200, json.dumps({"data": [{"id": said}, {"id": said.removeprefix("Bearer ")}]}).encode())

    server = fake({"GET /v1/models": models(SERVED_OF_VISION), "POST /v1/chat/completions": echo})
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", server.url, "--api-key", key, *FAST)
    assert code == 1 and "HTTP 400" in out and "[api key]" in out, out
    assert key not in out and key[:3] not in out.replace("[api key]", ""), out
    listing = fake(
        {"GET /v1/models": echo_models, "POST /v1/chat/completions": vllm_like({"drafted": 0, "accepted": 0})}
    )
    for json_or_table in (["--json"], []):
        code, out = run_cli(
            None,
            "bench",
            "run",
            str(VISION_SPEC),
            "--url",
            listing.url,
            "--api-key",
            key,
            "--model",
            SERVED_OF_VISION,
            *FAST,
            *json_or_table,
        )
        assert code == 0, out
        assert "[api key]" in out and key not in out and json.dumps(key)[1:-1] not in out, out


VISION_SPEC = APPS / "gemma4-vision.yaml"
SERVED_OF_VISION = "gemma-4-26b-vision"


# ------------------------------------------------------------------------------------------ 2. bounded JSON


DEEP = "[" * 3000 + "]" * 3000
HUGE = "1" * 4400


def _stream_of(text: str) -> Handler:
    def answer(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sse(handler)
        event(handler, chunk("abc"))
        event(handler, text)

    return answer


@pytest.mark.parametrize(
    ("route", "handler", "stream", "said"),
    [
        (
            "GET /v1/models",
            lambda h, _: send(h, 200, f'{{"data": {DEEP}}}'.encode()),
            [],
            "nested deeper than 64 levels",
        ),
        (
            "GET /v1/models",
            lambda h, _: send(h, 200, f'{{"data": [{{"id": "m", "n": {HUGE}}}]}}'.encode()),
            [],
            "a JSON number of 4400 characters",
        ),
        (
            "POST /v1/chat/completions",
            lambda h, _: send(h, 200, f'{{"choices": {DEEP}}}'.encode()),
            ["--no-stream"],
            "nested deeper than 64 levels",
        ),
        (
            "POST /v1/chat/completions",
            lambda h, _: send(h, 200, f'{{"choices": [], "usage": {{"completion_tokens": {HUGE}}}}}'.encode()),
            ["--no-stream"],
            "a JSON number of 4400 characters",
        ),
        ("POST /v1/chat/completions", _stream_of(f'{{"choices": {DEEP}}}'), [], "nested deeper than 64 levels"),
    ],
)
def test_json_nested_deep_or_with_a_huge_number_is_refused_naming_the_server(
    fake: Callable[..., FakeServer], route: str, handler: Handler, stream: list[str], said: str
) -> None:
    server = _vllm(fake, SERVED_OF_VISION, **{route: handler})
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", server.url, *FAST, *stream)
    _clean(out)
    assert code == 1 and server.url in out and said in out, out


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (f'{{"choices": {DEEP}}}', "nested deeper than 64 levels"),
        (f'{{"usage": {{"completion_tokens": {HUGE}}}}}', "4400 characters"),
    ],
)
def test_a_responses_log_with_deep_or_huge_json_is_refused_naming_the_file(
    tmp_path: Path, answer: str, said: str
) -> None:
    header = {
        "model": "m",
        "prompt": "space-invaders",
        "max_tokens": 10,
        "temperature": 0.6,
        "top_p": 0.95,
        "warmups": 0,
        "runs": 1,
    }
    log = tmp_path / "bench.log"
    log.write_text(
        f"### olarespack-bench {json.dumps(header)}\n### response 1\n{answer}\n### seconds 0.5\n### end\n",
        encoding="utf-8",
    )
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--responses", str(log))
    _clean(out)
    assert code == 1 and str(log) in out and said in out, out
    header_deep = log.read_text(encoding="utf-8").replace('"runs": 1}', f'"runs": 1, "x": {DEEP}}}')
    log.write_text(header_deep, encoding="utf-8")
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--responses", str(log))
    assert code == 1 and "does not say the method" in out, out


# ------------------------------------------------------------------------------------------ 3-6. inputs first


def test_a_prompt_file_whose_name_yaml_would_misread_is_recorded(
    fake: Callable[..., FakeServer], tmp_path: Path
) -> None:
    spec = _copy(tmp_path)
    prompt = tmp_path / "my: prompt.txt"
    prompt.write_text("Write a haiku about memory bandwidth.", encoding="utf-8")
    server = _vllm(fake)
    code, out = run_cli(
        tmp_path,
        "bench",
        "run",
        str(spec),
        "--url",
        server.url,
        *FAST,
        "--prompt-file",
        str(prompt),
        "--record",
        "--hardware",
        "rtx5090-laptop",
    )
    _clean(out)
    assert code == 0, out
    record = yaml.safe_load(spec.read_text(encoding="utf-8"))["changelog"][0]["bench"]
    assert record["prompt"].startswith("my: prompt.txt@")


def test_a_record_the_spec_would_refuse_is_refused_before_the_first_request(
    fake: Callable[..., FakeServer], tmp_path: Path
) -> None:
    spec = _copy(tmp_path)
    text = spec.read_text(encoding="utf-8")
    version = yaml.safe_load(text)["version"]
    flow = text[: text.index("changelog:")] + f'changelog: [{{version: "{version}", note: "First."}}]\n'
    spec.write_text(flow, encoding="utf-8")
    server = _vllm(fake)
    code, out = run_cli(
        tmp_path, "bench", "run", str(spec), "--url", server.url, *FAST, "--record", "--hardware", "rtx5090-laptop"
    )
    assert code == 1 and "the spec's layout defeats an in-place edit" in out, out
    assert server.completions == 0 and "run 1/2" not in out  # nothing measured, so nothing lost


def test_an_unclosed_ipv6_url_is_a_usage_error_that_prints_no_password() -> None:
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", "http://bench:s3cretpw@[::1:1")
    _clean(out)
    assert code == 2 and "--url" in out and "not a URL" in out and "s3cretpw" not in out, out


def test_a_refused_record_after_a_live_bench_prints_the_result_first(
    fake: Callable[..., FakeServer], tmp_path: Path
) -> None:
    spec = _copy(tmp_path)
    before = spec.read_bytes()
    server = _vllm(fake, "someone/another-model")
    for as_json in ([], ["--json"]):
        code, out = run_cli(
            tmp_path,
            "bench",
            "run",
            str(spec),
            "--url",
            server.url,
            *FAST,
            "--record",
            "--hardware",
            "rtx5090-laptop",
            *as_json,
        )
        assert code == 1 and "not the spec's own model" in out, out
        if as_json:
            result = json.loads(out[out.index("{") : out.rindex("}") + 1])
            assert len(result["runs"]) == 2 and result["record"] is None
        else:
            assert "average " in out and out.index("average ") < out.index("not the spec's own model")
    assert spec.read_bytes() == before


def test_a_plot_path_that_is_an_input_is_refused_before_benching(
    fake: Callable[..., FakeServer], tmp_path: Path
) -> None:
    spec = _copy(tmp_path)
    before = spec.read_bytes()
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("hello", encoding="utf-8")
    (tmp_path / "link.png").symlink_to(spec)
    server = _vllm(fake)
    for plot in (str(spec), "apps/../apps/gemma4-dflash.yaml", "./apps//gemma4-dflash.yaml", "link.png", str(prompt)):
        code, out = run_cli(
            tmp_path,
            "bench",
            "run",
            str(spec),
            "--url",
            server.url,
            *FAST,
            "--record",
            "--hardware",
            "rtx5090-laptop",
            "--prompt-file",
            str(prompt),
            "--plot",
            plot,
        )
        assert code == 2 and "--plot " in out and "which bench reads (or records into)" in out, (plot, out)
    assert server.completions == 0 and spec.read_bytes() == before


# ------------------------------------------------------------------------------------------ 7, 10. what can be


def test_a_rate_no_gpu_can_reach_is_refused_and_not_recorded(fake: Callable[..., FakeServer], tmp_path: Path) -> None:
    spec = _copy(tmp_path, AUDIO)
    before = spec.read_bytes()
    instant = {"predicted_ms": 30 * 1000 / 896_861, "predicted_per_second": 896_861.0}
    server = fake({"GET /v1/models": models(AUDIO_SERVED), "POST /v1/chat/completions": _llama(instant)})
    code, out = run_cli(
        tmp_path,
        "bench",
        "run",
        str(spec),
        "--url",
        server.url,
        *FAST,
        "--no-stream",
        "--record",
        "--hardware",
        "rtx5090-laptop",
    )
    _clean(out)
    assert code == 1 and "896,861.00 tokens/s is more than the hardware can decode" in out, out
    assert "rtx5090-laptop's 896 GB/s over the 4.38 GB a token reads, times 1 token(s) a step" in out
    assert server.url in out and "average 896861.00" in out  # named, and the measurement printed
    assert spec.read_bytes() == before


def test_drafting_counters_that_contradict_each_other_are_refused(fake: Callable[..., FakeServer]) -> None:
    drafting = {"predicted_ms": 1000.0, "predicted_per_second": 30.0, "draft_n": 2_000_000, "draft_n_accepted": 10}
    server = fake({"GET /v1/models": models(AUDIO_SERVED), "POST /v1/chat/completions": _llama(drafting)})
    code, out = run_cli(None, "bench", "run", str(AUDIO), "--url", server.url, *FAST, "--no-stream")
    _clean(out)
    assert code == 1 and server.url in out and "2,000,000 draft tokens for 30 generated" in out, out

    counts = {"drafted": 0, "accepted": 0}

    def vllm_overcounting(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        vllm_like(counts)(handler, body)
        counts["drafted"] += 2_000_000

    server = fake(
        {
            "GET /v1/models": models(DFLASH_SERVED),
            "POST /v1/chat/completions": vllm_overcounting,
            "GET /metrics": metrics(counts),
        }
    )
    code, out = run_cli(None, "bench", "run", str(DFLASH), "--url", server.url, *FAST)
    # each run's drafting is read between runs: the first run is already impossible
    assert code == 1 and "run 1: impossible drafting counters" in out and "draft tokens for 30 generated" in out, out


@pytest.mark.helm  # lint reaches helm
def test_lint_refuses_a_recorded_figure_no_gpu_can_reach(project: Path, fake: Callable[..., FakeServer]) -> None:
    spec = project / "apps" / "gemma4-dflash.yaml"
    server = _vllm(fake)
    code, out = run_cli(
        project, "bench", "run", str(spec), "--url", server.url, *FAST, "--record", "--hardware", "rtx5090-laptop"
    )
    assert code == 0, out
    code, out = run_cli(project, "lint", "apps/gemma4-dflash.yaml", "--no-helm4")
    assert code == 0, out
    text = spec.read_text(encoding="utf-8")
    record = yaml.safe_load(text)["changelog"][0]["bench"]
    forged = text.replace(f"tps_peak: {record['tps_peak']}", "tps_peak: 896861.0", 1)
    spec.write_text(forged, encoding="utf-8")
    code, out = run_cli(project, "lint", "apps/gemma4-dflash.yaml", "--no-helm4")
    assert code == 1 and "changelog[0].bench: the recorded peak 896,861.00 tokens/s is more than" in out, out
    assert "[bench-impossible]" in out


def test_record_needs_the_hardware_the_server_ran_on(fake: Callable[..., FakeServer], tmp_path: Path) -> None:
    spec = _copy(tmp_path)
    before = spec.read_bytes()
    server = _vllm(fake)
    for more, said in (
        (["--record"], "--record needs --hardware NAME"),
        (["--record", "--hardware", "my-vm"], "--hardware 'my-vm': not a hardware profile"),
        (["--record", "--hardware", "rtx5090"], "the spec targets rtx5090-laptop"),
    ):
        code, out = run_cli(tmp_path, "bench", "run", str(spec), "--url", server.url, *FAST, *more)
        assert code == 2 and said in out, out
    assert server.completions == 0 and spec.read_bytes() == before


def test_uneven_runs_are_warned_about_and_marked(fake: Callable[..., FakeServer], tmp_path: Path) -> None:
    spec = _copy(tmp_path, AUDIO)
    rates = iter([2133.0, 2102.0, 255.0])

    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        rate = next(rates)
        _llama({"predicted_ms": 30 * 1000 / rate, "predicted_per_second": rate})(handler, body)

    server = fake({"GET /v1/models": models(AUDIO_SERVED), "POST /v1/chat/completions": answer})
    code, out = run_cli(
        tmp_path,
        "bench",
        "run",
        str(spec),
        "--url",
        server.url,
        "--runs",
        "3",
        "--warmups",
        "0",
        "--max-tokens",
        "30",
        "--no-stream",
        "--json",
    )
    assert code == 0, out
    result = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert result["uneven"] is True
    assert any(
        note.startswith("warning: uneven runs: the slowest (255.00 t/s) is below 50% of the median")
        for note in result["notes"]
    )


# ------------------------------------------------------------------------------------------ 8. text as text


FORGED = "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\x1b]0;owned\x07\x1b[2J\rok\nFAIL forged\u202eline"


def test_server_text_prints_as_text(fake: Callable[..., FakeServer]) -> None:
    server = fake(
        {
            "GET /v1/models": models(FORGED),
            "POST /v1/chat/completions": lambda h, _: send(h, 500, FORGED.encode(), "text/plain"),
        }
    )
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", server.url, *FAST)
    assert code == 1 and "HTTP 500" in out, out
    for raw in ("\x1b", "\x07", "\r", "\u202e", "\nFAIL forged"):
        assert raw not in out, (raw, out)
    assert "\\x1b]8;;http://evil.example" in out
    listed = _vllm(fake, FORGED)
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", listed.url, *FAST, "--model", SERVED_OF_VISION)
    assert code == 0 and "\x1b" not in out and "\\x1b]0;owned" in out and "\nFAIL forged" not in out, out


# ------------------------------------------------------------------------------------------ 9. /metrics cut


def test_a_metrics_text_past_the_bound_says_so(fake: Callable[..., FakeServer]) -> None:
    """The counters after 100,001 lines of comments: not read, and the bench says so instead of reporting no
    drafting as if the text had none."""
    padded = b"# filler\n" * 100_001 + METRICS.encode()
    server = fake(
        {
            "GET /v1/models": models(DFLASH_SERVED),
            "POST /v1/chat/completions": vllm_like({"drafted": 0, "accepted": 0}),
            "GET /metrics": lambda h, _: send(h, 200, padded, "text/plain"),
        }
    )
    code, out = run_cli(None, "bench", "run", str(DFLASH), "--url", server.url, *FAST, "--json")
    assert code == 0, out
    result = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert result["summary"]["acceptance"] is None
    assert any(
        "GET /metrics: over 100000 lines" in note and "read only in part: no speculative acceptance" in note
        for note in result["notes"]
    ), result["notes"]


def test_the_bound_is_not_guessed_where_the_drafting_is_not_typed() -> None:
    from olarespack.engines import engine_for
    from olarespack.fit.bound import DecodeBound, decode_bound
    from olarespack.spec.load import load_spec

    spec = load_spec(DFLASH)
    bench = engine_for(spec.engine).engine.bench()
    assert bench.draft_tokens(spec.engine) == 8
    bound = decode_bound(spec, "rtx5090-laptop", 8)
    # 17.5 GB of weights, 8 of 128 experts a token: 1.09 GB; 896 GB/s over it, 9 tokens a step, margin 2
    assert isinstance(bound, DecodeBound) and bound.bytes_per_token == 1_093_750_000
    assert bound.tps == pytest.approx(2 * 896e9 / 1_093_750_000 * 9)
    untyped = spec.engine.model_copy(update={"extra_args": ["--speculative-config", '{"num_speculative_tokens": 64}']})
    assert bench.draft_tokens(untyped) is None
    said = decode_bound(spec, "rtx5090-laptop", None)
    assert isinstance(said, str) and "drafting outside its typed fields" in said


@pytest.mark.parametrize("before", [270, 280, 290, 296])
def test_a_key_echoed_across_the_cut_shows_none_of_its_characters(fake: Callable[..., FakeServer], before: int) -> None:
    """The server's error body is read and shown to 300 characters: a key the cut falls inside was printed up
    to the cut (10 of its 32 characters)."""
    key = "k" + "0123456789abcdefghijklmnopqrstu"

    def echo(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sent = handler.headers["Authorization"].removeprefix("Bearer ")
        send(handler, 400, ("x" * before + sent + " and more").encode(), "text/plain")

    server = fake({"GET /v1/models": models(SERVED_OF_VISION), "POST /v1/chat/completions": echo})
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", server.url, "--api-key", key, *FAST)
    assert code == 1 and "HTTP 400" in out and "[api key]" in out, out
    assert "k012" not in out, out


def test_a_five_megabyte_model_id_is_refused_not_printed(fake: Callable[..., FakeServer]) -> None:
    huge = "m" * (5 << 20)
    server = fake({"GET /v1/models": models(huge)})
    code, out = run_cli(None, "bench", "run", str(VISION_SPEC), "--url", server.url, *FAST)
    assert code == 1 and "not model ids" in out and len(out) < 10_000, out[:2000]
    _clean(out)


def test_a_plot_path_that_is_another_file_is_refused_before_benching(
    fake: Callable[..., FakeServer], tmp_path: Path
) -> None:
    """Another spec (not one bench reads) was overwritten with the picture."""
    spec = _copy(tmp_path)
    other = tmp_path / "apps" / "gemma4-audio.yaml"
    shutil.copy(APPS / "gemma4-audio.yaml", other)
    named_png = tmp_path / "notes.png"
    named_png.write_text("my notes", encoding="utf-8")
    before = {p: p.read_bytes() for p in (other, named_png)}
    server = _vllm(fake)
    for plot, said in ((str(other), "ending in .png"), (str(named_png), "is not a PNG")):
        code, out = run_cli(tmp_path, "bench", "run", str(spec), "--url", server.url, *FAST, "--plot", plot)
        assert code == 2 and said in out, (plot, out)
    assert server.completions == 0 and {p: p.read_bytes() for p in before} == before
