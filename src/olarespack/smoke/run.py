"""One smoke: the spec's chart rendered by the real helm, its server container read as the pod runs it (importer's
resolver: $(VAR) expanded from its env), that command line started on the engine's local build with only the
changes the engine says this machine forces (engines/<kind>/smoke.py), then the requests the app offers, the
server's /metrics read with bench's reader, and the server stopped. Progress goes to `say`; nothing prints."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olarespack.check.inputs import Target
from olarespack.engines import engine_for
from olarespack.engines.base import EngineBench
from olarespack.engines.client import BenchError, Limits, Reply, Server
from olarespack.engines.confine import confine, verify
from olarespack.engines.release_files import cache_dir
from olarespack.engines.smoke import Booting, Change, EngineSmoke, ModelFiles, Request, Runtime, SmokeError
from olarespack.helm import HelmBinary
from olarespack.importer import server_container
from olarespack.project import load_resolved
from olarespack.render import render_chart
from olarespack.write import write_chart

DEFAULT_CACHE = cache_dir()  # the same cache `make test` fills (XDG_CACHE_HOME, else ~/.cache)
BOOT_TIMEOUT_S = 1800.0  # vLLM on two busy cores: 130-210 s measured, far more when others compile beside it
PROGRESS_EVERY_S = 30.0
MAX_TOKENS = 64
LOG_TAIL_BYTES = 4 << 20  # vLLM's traceback and the lines around it; never the whole log


@dataclass
class Answer:
    request: str
    ok: bool
    said: str  # the answer in short, or why it was refused


@dataclass
class SmokeReport:
    spec: str
    runtime: Runtime
    files: ModelFiles
    booting: Booting
    log: Path
    boot_seconds: float = 0.0
    refused: str = ""  # why the server did not come up ("" it did)
    answers: list[Answer] = field(default_factory=list)
    metrics: str = ""

    @property
    def changes(self) -> list[Change]:
        return self.booting.changes

    @property
    def ok(self) -> bool:
        return not self.refused and all(answer.ok for answer in self.answers)

    @property
    def failures(self) -> list[str]:
        return ([f"boot: {self.refused}"] if self.refused else []) + [
            f"{a.request}: {a.said}" for a in self.answers if not a.ok
        ]


def log_tail(log: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The end of the server's log: where the engine says why it stopped (a chart may make it log gigabytes)."""
    with log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - limit))
        return handle.read(limit).decode("utf-8", errors="replace")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Serving:
    """A booted server of the spec's chart: where it answers and what it serves (booted() yields it)."""

    report: SmokeReport
    port: int
    served: str
    engine: EngineSmoke[Any]
    bench: EngineBench
    engine_spec: Any  # the spec's engine section (the engine's own model)
    name: str  # the app's name

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def booted(
    spec_file: Path,
    work: Path,
    *,
    models: Path | None = None,
    engine_path: Path | None = None,
    cache: Path = DEFAULT_CACHE,
    say: Callable[[str], None] = lambda _: None,
    boot_timeout: float = BOOT_TIMEOUT_S,
) -> Iterator[Serving]:
    """The spec's chart booted here (tiny stand-in models unless `models` is given) for as long as the block
    runs, then stopped. A server that did not come up yields a report whose `refused` says why.
    SmokeError: it cannot start here (no local engine build, a model file missing)."""
    label = str(spec_file)
    spec = load_resolved(spec_file, label, strict=False).spec
    if spec.olares.pinned_model is not None:
        # the engine's flags are the same in both shapes (ENGINE_ARGS is the command line but the wrapper's own
        # words); the single-Deployment shape boots them here without the Model Console's download
        say(f"{spec.name}: a pinned-model app: its engine flags boot in the single-Deployment shape")
        spec = spec.model_copy(
            update={"olares": spec.olares.model_copy(update={"pinned_model": None, "llm_gateway": None})}
        )
    chart = render_chart(spec, label)
    folder = work / "chart" / chart.name
    write_chart(chart, folder)
    engine, argv, env, unresolved = server_container(Target(chart, folder), HelmBinary())
    if unresolved:
        raise SmokeError(f"{label}: the server's command line has references the pod would not resolve: {unresolved}")
    bound = engine_for(spec.engine)
    local = engine.smoke()
    runtime = local.runtime(bound.spec, cache, engine_path)
    say(f"{spec.name}: {engine.title} on {runtime.label}")
    if models is None:
        say(f"{spec.name}: tiny random-weight models of its architecture (the stand-ins of its files)")
        files = local.tiny_models(bound.spec, runtime, work / "models")
    else:
        files = local.user_models(bound.spec, models)
    # a stranger's chart boots here: what would reach outside the boot's folder is refused first, then checked
    # again on what the engine's changes made of it
    roots = [work, *([models] if models is not None else []), *files.paths.values()]
    confined = confine(
        argv, env, local.policy(bound.spec), local.swapped(bound.spec, files), roots, work, local.chart_head
    )
    booting = local.booting(
        bound.spec,
        confined.argv,
        confined.env,
        runtime,
        files,
        free_port(),
        work,
        say=lambda line: say(f"{spec.name}: {line}"),
    )
    booting.changes[:0] = confined.changes
    verify(booting.argv, booting.env, roots, work, local.boot_head)
    report = SmokeReport(label, runtime, files, booting, work / "server.log")
    served = engine.bench().served_name(bound.spec) or "model"
    with report.log.open("wb") as log:
        server = subprocess.Popen(
            booting.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work,
            env={**os.environ, **booting.env},
            start_new_session=True,
        )
        try:
            report.boot_seconds = _wait_up(server, booting, say, spec.name, report.log, boot_timeout)
            if server.poll() is not None or report.boot_seconds < 0:
                text = log_tail(report.log)
                why = (
                    f"did not answer within {boot_timeout:g} s"
                    if server.poll() is None
                    else f"exited {server.returncode}"
                )
                report.refused = f"{engine.title} {why}: {local.refusal(text) or 'see the log'} (log: {report.log})"
                report.boot_seconds = abs(report.boot_seconds)
            else:
                say(f"{spec.name}: up in {report.boot_seconds:.0f} s")
            yield Serving(report, booting.port, served, local, engine.bench(), bound.spec, spec.name)
        finally:
            _stop(server)


def smoke(
    spec_file: Path,
    work: Path,
    *,
    models: Path | None = None,
    engine_path: Path | None = None,
    cache: Path = DEFAULT_CACHE,
    say: Callable[[str], None] = lambda _: None,
    boot_timeout: float = BOOT_TIMEOUT_S,
) -> SmokeReport:
    """Boot the spec's chart here and ask it what the app offers; tiny stand-in models unless `models` is given.
    SmokeError: it cannot start here (no local engine build, a model file missing)."""
    with booted(
        spec_file, work, models=models, engine_path=engine_path, cache=cache, say=say, boot_timeout=boot_timeout
    ) as serving:
        report = serving.report
        if not report.refused:
            requests = serving.engine.requests(serving.engine_spec, report.files)
            say(f"{serving.name}: sending {len(requests)} requests")
            _ask(report, requests, serving.port, serving.served, serving.bench)
    return report


def _wait_up(
    server: subprocess.Popen[bytes], booting: Booting, say: Callable[[str], None], name: str, log: Path, timeout: float
) -> float:
    """Seconds from start to the health check answering 200; negative when it never did (timeout or exit)."""
    import httpx

    started = time.monotonic()
    shown = started
    url = f"http://127.0.0.1:{booting.port}{booting.health_path}"
    while server.poll() is None:
        now = time.monotonic()
        if now - started > timeout:
            return -(now - started)
        if now - shown >= PROGRESS_EVERY_S:
            shown = now
            say(f"{name}: booting, {now - started:.0f} s (log: {log})")
        try:
            if httpx.get(url, timeout=5.0, trust_env=False).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    return -(time.monotonic() - started)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """Stop the server and what it started (vLLM's engine core is a child process of its own)."""
    if server.poll() is None:
        try:
            os.killpg(server.pid, 15)
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()
        except ProcessLookupError:
            pass


def _ask(report: SmokeReport, requests: list[Request], port: int, served: str, bench: EngineBench) -> None:
    real = report.files.real
    with Server(f"http://127.0.0.1:{port}", None, Limits(max_tokens=MAX_TOKENS, run_s=600.0)) as server:
        chat_prompt: int | None = None
        for request in requests:
            if (request.only_real and not real) or (request.only_tiny and real):
                continue
            try:
                reply = server.complete({"model": served, **request.body})
            except BenchError as err:
                report.answers.append(Answer(request.name, False, f"refused: {err}"))
                continue
            if request.name == "chat":
                chat_prompt = reply.prompt_tokens
                timings = bench.timings(reply.body)
                if timings is not None:
                    report.metrics = f"the server's timings: {timings.tokens} tokens at {timings.per_second:.1f} t/s"
            report.answers.append(_checked(request, reply, real, chat_prompt))
        if bench.metrics_path:
            _metrics(report, server, bench)


def _checked(request: Request, reply: Reply, real: bool, chat_prompt: int | None) -> Answer:
    choices = reply.body.get("choices") or [{}]
    first = choices[0] if isinstance(choices, list) and choices else {}
    message = (first.get("message") or {}) if isinstance(first, dict) else {}
    message = message if isinstance(message, dict) else {}
    text = str(message.get("content") or "")
    listed = message.get("tool_calls") if isinstance(message, dict) else None
    calls = [
        f
        for c in (listed if isinstance(listed, list) else [])[:16]
        if isinstance(c, dict) and isinstance(f := c.get("function"), dict)
    ]
    said = f"200, {reply.prompt_tokens} prompt tokens, " + (
        f"tool call {str(calls[0].get('name'))[:60]!r} {str(calls[0].get('arguments'))[:120]!r}"
        if calls
        else f"said {text[:60]!r}"
    )
    if request.tool and (real or request.only_tiny) and not any(c.get("name") == request.tool for c in calls):
        return Answer(request.name, False, f"{said}: no {request.tool} tool call")
    if request.expect and real and request.expect not in text.lower():
        return Answer(request.name, False, f"{said}: expected {request.expect!r}")
    media = request.name in ("image", "audio")
    if media and chat_prompt is not None and (reply.prompt_tokens or 0) <= chat_prompt + 10:
        return Answer(request.name, False, f"{said}: the {request.name} added no tokens to the prompt")
    return Answer(request.name, True, said)


def _metrics(report: SmokeReport, server: Server, bench: EngineBench) -> None:
    path = bench.metrics_path
    if path is None:  # an engine without counters: nothing to read
        return
    try:
        text, whole = server.text(path)
        if text is not None and not whole:
            raise BenchError(f"GET {path}: read only in part (past its bound)")
        counts = bench.draft_counts(text) if text is not None else None
    except (BenchError, ValueError) as err:
        report.answers.append(Answer(path, False, f"not read: {err}"))
        return
    if text is None:
        report.answers.append(Answer(path, False, "the server has none"))
    elif counts is None:
        report.metrics = f"{path}: read, no drafting counters (no speculative decoding ran)"
    else:
        report.metrics = f"{path}: {counts.drafted} tokens drafted, {counts.accepted} accepted"
