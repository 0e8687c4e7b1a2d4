"""`olarespack bench` against servers on loopback: a well-behaved vLLM-like one (streamed events of several
tokens, usage at the end, /metrics counters that move with the runs), and hostile ones. Each bad server gets its
message (naming the URL and what was wrong), exit 1, no traceback, and a bounded run time.

FakeServer is shared by the other bench tests."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import APPS, run_cli
from olarespack.bench.run import measure
from olarespack.engines import engine_for
from olarespack.engines.client import Limits, Reply
from olarespack.spec.load import load_spec
from test_serve import free_port

FIXTURES = Path(__file__).parent / "fixtures" / "bench"
METRICS = (FIXTURES / "vllm-0.21-metrics.txt").read_text(encoding="utf-8")
VISION = APPS / "gemma4-vision.yaml"  # a vLLM app with MTP drafting
SERVED = "gemma-4-26b-vision"  # the vision app's served_model_name
Handler = Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]


class FakeServer:
    """An HTTP server on loopback whose answers a test writes: `routes` maps "METHOD /path" to a function of the
    request handler and the JSON body. Counts what it answered; stops with the test."""

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.routes = routes
        self.completions = 0
        self.metrics_reads = 0
        owner = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # as real servers do: without it Nagle's algorithm holds small events back and sends them together
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                route = owner.routes.get(f"{method} {self.path}")
                if route is None:
                    send(self, 404, b"not here", "text/plain")
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
                    route(self, body)

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, data: bytes, kind: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def models(name: str = SERVED) -> Handler:
    return lambda h, _: send(h, 200, json.dumps({"object": "list", "data": [{"id": name, "object": "model"}]}).encode())


def sse(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()


def event(handler: BaseHTTPRequestHandler, data: dict[str, Any] | str) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    handler.wfile.write(f"data: {text}\n\n".encode())
    handler.wfile.flush()


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def vllm_like(fake_counts: dict[str, int], per_event: int = 3, pause: float = 0.003) -> Handler:
    """vLLM's shape: a role event, text events of `per_event` tokens (speculative decoding sends several), a
    finish event, the usage event, [DONE]; drafting counted in /metrics (3 drafted, 2 accepted per event)."""

    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        tokens = int(body["max_tokens"])
        usage = {"prompt_tokens": 180, "completion_tokens": tokens, "total_tokens": 180 + tokens}
        if not body.get("stream"):
            time.sleep(pause * tokens / per_event)
            fake_counts["drafted"] += 3 * (tokens // per_event)
            fake_counts["accepted"] += 2 * (tokens // per_event)
            send(
                handler,
                200,
                json.dumps(
                    {
                        "object": "chat.completion",
                        "usage": usage,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "x" * tokens},
                                "finish_reason": "length",
                            }
                        ],
                    }
                ).encode(),
            )
            return
        sse(handler)
        event(handler, {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for _ in range(tokens // per_event):
            time.sleep(pause)
            event(handler, chunk("abc"[:per_event]))
            fake_counts["drafted"] += 3
            fake_counts["accepted"] += 2
        event(handler, chunk(finish="length"))
        event(handler, {"object": "chat.completion.chunk", "choices": [], "usage": usage})
        event(handler, "[DONE]")

    return answer


def metrics(fake_counts: dict[str, int]) -> Handler:
    """The recorded /metrics text with the two token counters moved by what the fake drafted so far."""

    def answer(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        text = re.sub(
            r"(vllm:spec_decode_num_draft_tokens_total\{[^}]*\}) 29997\.0",
            lambda m: f"{m.group(1)} {29997 + fake_counts['drafted']}.0",
            METRICS,
        )
        text = re.sub(
            r"(vllm:spec_decode_num_accepted_tokens_total\{[^}]*\}) 25920\.0",
            lambda m: f"{m.group(1)} {25920 + fake_counts['accepted']}.0",
            text,
        )
        send(handler, 200, text.encode(), "text/plain; version=0.0.4")

    return answer


@pytest.fixture
def fake() -> Iterator[Callable[[dict[str, Handler]], FakeServer]]:
    made: list[FakeServer] = []

    def make(routes: dict[str, Handler]) -> FakeServer:
        made.append(FakeServer(routes))
        return made[-1]

    yield make
    for server in made:
        server.stop()


def bench(*args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    code, out = run_cli(None, "bench", "run", str(VISION), *args)
    return code, out, time.monotonic() - started


# ------------------------------------------------------------------------------------------ a good server


def test_a_vllm_like_server_is_measured_by_its_stream_and_its_counters(fake: Callable[..., FakeServer]) -> None:
    counts = {"drafted": 0, "accepted": 0}
    server = fake(
        {"GET /v1/models": models(), "POST /v1/chat/completions": vllm_like(counts), "GET /metrics": metrics(counts)}
    )
    code, out, _ = bench("--url", server.url + "/v1/", "--runs", "3", "--warmups", "1", "--max-tokens", "60", "--json")
    assert code == 0, out
    result = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert result["settings"]["model"] == SERVED and result["settings"]["max_tokens"] == 60
    assert [run["tokens"] for run in result["runs"]] == [60, 60, 60]  # the usage, not the 20 events
    assert {run["source"] for run in result["runs"]} == {"stream"}
    assert result["definition"].startswith("(completion tokens - 1) / first to last streamed token")
    summary = result["summary"]
    # the measured runs only: 3 runs x 20 events x (3 drafted, 2 accepted); the warm-up's are outside the window
    assert (summary["drafted"], summary["accepted"]) == (180, 120)
    assert summary["acceptance"] == pytest.approx(200 / 3)
    assert summary["tps_min"] <= summary["tps_avg"] <= summary["tps_peak"]
    assert all(run["ttft_ms"] is not None and run["ttft_ms"] >= 0 for run in result["runs"])
    assert "warm-up 1/1:" in out and "run 3/3:" in out  # progress while it runs


def test_the_table_says_the_definition_and_the_counters_it_used(fake: Callable[..., FakeServer]) -> None:
    counts = {"drafted": 0, "accepted": 0}
    server = fake(
        {"GET /v1/models": models(), "POST /v1/chat/completions": vllm_like(counts), "GET /metrics": metrics(counts)}
    )
    code, out, _ = bench("--url", server.url, "--runs", "2", "--warmups", "0", "--max-tokens", "30", "--no-stream")
    assert code == 0, out
    assert re.search(r"average [\d.]+ t/s, peak [\d.]+, min [\d.]+, sigma [\d.]+ \(sample\)", out)
    assert "t/s: completion tokens / the whole request" in out  # not streamed: the whole request
    assert "speculative acceptance 66.7% (40 accepted of 60 drafted, from the server's /metrics" in out
    assert "time to first token" not in out


def test_the_stream_rate_is_vllm_benchs_decode_rate() -> None:
    """(tokens - 1) over first to last token: the first token's wait (the prompt) is not in it."""
    engine = engine_for(load_spec(VISION).engine).engine.bench()
    run = measure(Reply(101, 180, 2.5, first_token_s=0.5, last_token_s=2.5), engine, 1, False, "x")
    assert (run.tps, run.source, run.ttft_ms) == (50.0, "stream", 500.0)
    whole = measure(Reply(100, 180, 2.0), engine, 1, False, "x")
    assert (whole.tps, whole.source) == (50.0, "request")


# ------------------------------------------------------------------------------------------ bad servers


def test_an_unreachable_url_fails_fast_with_the_address() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, seconds = bench("--url", url)
    assert code == 1
    assert f"error: {url}: GET /v1/models: cannot connect" in out
    assert "Traceback" not in out and seconds < 15


def test_a_password_in_the_url_is_never_printed() -> None:
    port = free_port()
    code, out, _ = bench("--url", f"http://bench:hunter2secret@127.0.0.1:{port}/v1")
    assert code == 1 and f"error: http://127.0.0.1:{port}: GET /v1/models: cannot connect" in out
    assert "hunter2secret" not in out


@pytest.mark.parametrize(
    "secret_url",
    [
        "http://bench:s3cretpw#x@127.0.0.1:9",
        "http://bench:s3cret/pw@127.0.0.1:9",
        "http://bench:s3cret?pw@127.0.0.1:9",
        "http://127.0.0.1:99999",
    ],
)
def test_a_url_whose_port_does_not_parse_is_a_usage_error_that_shows_no_password(secret_url: str) -> None:
    """With `#`, `?` or `/` in a password the URL splits inside it, and its tail reads as the port."""
    code, out, _ = bench("--url", secret_url)
    assert code == 2, out
    assert "the port is not a number from 0 to 65535" in out
    assert "s3cret" not in out and "internal error" not in out and "Traceback" not in out


def test_an_error_page_that_never_ends_is_not_read_past_its_start(fake: Callable[..., FakeServer]) -> None:
    def endless_error(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        handler.send_response(500)
        handler.send_header("Content-Type", "text/plain")
        handler.end_headers()
        try:
            while True:
                handler.wfile.write(b"overloaded " * 1000)
        except OSError:
            pass  # the client hung up: what the test wants

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": endless_error})
    code, out, seconds = bench("--url", server.url, "--max-tokens", "10", "--warmups", "0", "--run-timeout", "5")
    assert code == 1 and "HTTP 500" in out and "overloaded" in out
    assert seconds < 15


def test_a_server_that_is_not_openai_compatible(fake: Callable[..., FakeServer]) -> None:
    html = fake({"GET /v1/models": lambda h, _: send(h, 200, b"<html>Olares login</html>", "text/html")})
    code, out, _ = bench("--url", html.url)
    assert code == 1
    assert f"{html.url}: GET /v1/models: the answer is not an OpenAI model list" in out
    missing = fake({})
    code, out, _ = bench("--url", missing.url)
    assert code == 1 and "HTTP 404: not an OpenAI-compatible server" in out


def test_an_endless_stream_is_cut_at_max_tokens(fake: Callable[..., FakeServer]) -> None:
    def endless(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sse(handler)
        while True:
            event(handler, chunk("x"))

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": endless})
    code, out, seconds = bench("--url", server.url, "--max-tokens", "50", "--warmups", "0")
    assert code == 1
    assert "over 164 text events for max_tokens 50: the server ignores max_tokens" in out
    assert seconds < 20


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        (
            {"completion_tokens": 10**7, "prompt_tokens": 5},
            "impossible usage: 10000000 completion tokens for max_tokens 40",
        ),
        ({"completion_tokens": -3, "prompt_tokens": 5}, "impossible usage: -3 completion tokens"),
        ({"completion_tokens": 40, "prompt_tokens": -1}, "impossible usage: prompt_tokens is '-1'"),
        ({"completion_tokens": "40"}, "usage.completion_tokens is '40', not a count"),
        ({"completion_tokens": 0, "prompt_tokens": 5}, "the server generated no token"),
    ],
)
def test_impossible_usage_is_refused(fake: Callable[..., FakeServer], usage: dict[str, Any], said: str) -> None:
    def answer(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        send(
            handler, 200, json.dumps({"choices": [{"index": 0, "message": {"content": "x"}}], "usage": usage}).encode()
        )

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": answer})
    code, out, _ = bench("--url", server.url, "--max-tokens", "40", "--no-stream", "--warmups", "0")
    assert code == 1 and said in out, out
    assert "Traceback" not in out


def test_a_silent_server_is_bounded_by_the_run_timeout(fake: Callable[..., FakeServer]) -> None:
    def silent(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sse(handler)
        time.sleep(30)

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": silent})
    code, out, seconds = bench("--url", server.url, "--run-timeout", "2", "--warmups", "0")
    assert code == 1 and "the server sent nothing for 2 s" in out
    assert seconds < 10


def test_a_trickling_server_is_bounded_by_the_run_timeout(fake: Callable[..., FakeServer]) -> None:
    def trickle(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sse(handler)
        for _ in range(300):
            handler.wfile.write(b": keep-alive\n")
            handler.wfile.flush()
            time.sleep(0.1)

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": trickle})
    code, out, seconds = bench("--url", server.url, "--run-timeout", "2", "--warmups", "0")
    assert code == 1 and "the completion did not end within 2 s (--run-timeout)" in out
    assert seconds < 10


def test_a_line_that_never_ends_is_cut(fake: Callable[..., FakeServer]) -> None:
    def long_line(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sse(handler)
        handler.wfile.write(b"data: ")
        for _ in range(2000):
            handler.wfile.write(b"y" * 4096)

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": long_line})
    code, out, seconds = bench("--url", server.url, "--max-tokens", "2000", "--warmups", "0")
    assert code == 1 and "a stream line is over 1024 KiB" in out
    assert seconds < 20


def test_a_stream_without_usage_says_what_to_do(fake: Callable[..., FakeServer]) -> None:
    def no_usage(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        sse(handler)
        for _ in range(5):
            event(handler, chunk("x"))
        event(handler, chunk(finish="length"))
        event(handler, "[DONE]")

    server = fake({"GET /v1/models": models(), "POST /v1/chat/completions": no_usage})
    code, out, _ = bench("--url", server.url, "--warmups", "0")
    assert code == 1 and "ignored stream_options.include_usage (measure with --no-stream)" in out


def test_the_api_key_is_sent_and_never_printed(fake: Callable[..., FakeServer]) -> None:
    key = "sk-olarespack-test-key-0123456789abcdef"
    seen: list[str] = []

    def guarded(handler: BaseHTTPRequestHandler, _: dict[str, Any]) -> None:
        seen.append(str(handler.headers.get("Authorization")))
        send(
            handler, 401, json.dumps({"error": {"message": f"bad key {handler.headers.get('Authorization')}"}}).encode()
        )

    server = fake({"GET /v1/models": guarded})
    code, out, _ = bench("--url", server.url, "--api-key", key)
    assert seen == [f"Bearer {key}"]
    assert code == 1 and "HTTP 401: the server wants an API key" in out
    assert key not in out and key[8:] not in out


def test_impossible_drafting_counters_are_refused(fake: Callable[..., FakeServer]) -> None:
    counts = {"drafted": 0, "accepted": 0}
    broken = METRICS.replace(
        'vllm:spec_decode_num_accepted_tokens_total{model_name="gemma-4-26b-a4b-vision",engine="0"} 25920.0',
        'vllm:spec_decode_num_accepted_tokens_total{model_name="gemma-4-26b-a4b-vision",engine="0"} 40000.0',
    )
    assert broken != METRICS
    server = fake(
        {
            "GET /v1/models": models(),
            "POST /v1/chat/completions": vllm_like(counts),
            "GET /metrics": lambda h, _: send(h, 200, broken.encode(), "text/plain"),
        }
    )
    code, out, _ = bench("--url", server.url, "--warmups", "0", "--runs", "1", "--max-tokens", "9")
    assert code == 1
    assert f"{server.url}: GET /metrics: impossible counters: 40000 tokens accepted of 29997 drafted" in out


def test_bad_urls_are_usage_errors() -> None:
    for url in ("ftp://127.0.0.1:21", "127.0.0.1:8000", "http://127.0.0.1:8000/?x=1"):
        code, out, _ = bench("--url", url)
        assert code == 2, (url, out)


def test_limits_scale_with_max_tokens() -> None:
    small, large = Limits(max_tokens=10), Limits(max_tokens=2000)
    assert small.max_events == 84 and large.max_events == 4064
    assert large.max_bytes > small.max_bytes >= 256 << 10
    assert Limits(max_tokens=10, run_s=3).read_s == 3  # silence never outlasts the run's deadline


def test_a_measurement_of_another_model_is_not_recorded(fake: Callable[..., FakeServer], tmp_path: Path) -> None:
    """A server serving one other model is benched (with a note), but its speed is never recorded under this
    spec's settings."""
    counts = {"drafted": 0, "accepted": 0}
    server = fake(
        {
            "GET /v1/models": models("someone/another-model"),
            "POST /v1/chat/completions": vllm_like(counts),
            "GET /metrics": metrics(counts),
        }
    )
    spec = tmp_path / "vision.yaml"
    spec.write_bytes(VISION.read_bytes())
    code, out = run_cli(
        None,
        "bench",
        "run",
        str(spec),
        "--url",
        server.url,
        "--runs",
        "1",
        "--warmups",
        "0",
        "--max-tokens",
        "20",
        "--record",
        "--hardware",
        "rtx5090-laptop",
    )
    assert code == 1
    assert f"measured 'someone/another-model', not the spec's own model '{SERVED}': nothing recorded" in out
    assert spec.read_bytes() == VISION.read_bytes()
