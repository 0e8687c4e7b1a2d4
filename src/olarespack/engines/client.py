"""An OpenAI-compatible server as bench talks to it (httpx), with every wait and every size bounded: connect and
read timeouts, a deadline per request, a cap on the bytes and events a completion may stream (max_tokens and
some slack), and on the length of one line. A server that is unreachable, answers something that is not the
OpenAI API, streams forever or reports usage that cannot be gets a BenchError naming the URL and what was
wrong, never a traceback; the API key travels in a header and is never part of a message.

The stream is read as bytes and split into lines here, not with httpx's iter_lines, because iter_lines keeps
a line that never ends in memory until the deadline; here a line longer than MAX_LINE ends the run."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from olarespack.core.boundedjson import loads
from olarespack.core.errors import UsageError
from olarespack.core.shown import Shown
from olarespack.core.text import printable
from olarespack.engines.replies import BenchError, Reply, check_usage, reply_of, text_of

__all__ = ["BenchError", "Limits", "Reply", "Server", "base_url", "check_usage", "reply_of", "shown_url"]

MAX_LINE = 1 << 20  # one SSE line; a token's event is a few hundred bytes
MAX_JSON = 16 << 20  # a whole non-streamed answer
MAX_TEXT = 8 << 20  # /v1/models, /metrics
MAX_MODEL_ID = 512  # a Hugging Face id is at most 96 characters; a local path a few hundred
NOT_PARSED = "(an address that does not parse)"
BYTES_PER_TOKEN = 8 << 10  # llama.cpp's per-token events with probabilities stay far below this
COMPLETIONS = "/v1/chat/completions"
MODELS = "/v1/models"


def _first_bytes(pieces: Iterator[bytes], limit: int = 300) -> bytes:
    """At most `limit` bytes of a body, read no further (an error page may never end)."""
    data = b""
    for piece in pieces:
        data += piece[: limit - len(data)]
        if len(data) >= limit:
            break
    return data


def _port(parts: SplitResult) -> int | None:
    """The URL's port, None when it has none or it is not one (a password with `#`, `?` or `/` in it splits the
    URL elsewhere, and its tail would be read as the port)."""
    try:
        return parts.port
    except ValueError:
        return None


def _bad_port(parts: SplitResult) -> bool:
    """A port that is not one: with `#`, `?` or `/` in a password the URL splits inside it, and the password's
    tail reads as the port."""
    host_port = parts.netloc.rsplit("@", 1)[-1].rsplit("]", 1)[-1]  # past any user and any IPv6 literal
    return ":" in host_port and _port(parts) is None


def _split(url: str) -> SplitResult | None:
    """The URL's parts; None for one urlsplit refuses (an unclosed IPv6 bracket: `http://[::1:1`)."""
    try:
        return urlsplit(url)
    except ValueError:
        return None


def shown_url(url: str) -> str:
    """The URL as messages print it: scheme, host, port and path, never a user or password."""
    parts = _split(url)
    if parts is None:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        return f"{scheme}://{NOT_PARSED}" if scheme.isalpha() and len(scheme) < 10 else NOT_PARSED
    if _bad_port(parts):
        return f"{parts.scheme}://{NOT_PARSED}"
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    port = _port(parts)
    path = "" if "@" in parts.path else parts.path  # a password with `/` in it splits into the path
    return printable(urlunsplit((parts.scheme, netloc + (f":{port}" if port else ""), path, "", "")))


def base_url(url: str) -> str:
    """The server's root: trailing slashes and a /v1 suffix dropped (both spellings are common)."""
    parts = _split(url)
    if parts is None:
        raise UsageError(
            f"--url {shown_url(url)!r}: not a URL (an IPv6 address goes in brackets, as in http://[::1]:8000)"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--url {shown_url(url)!r}: give the server's http(s) address, e.g. http://127.0.0.1:8000")
    if _bad_port(parts):
        raise UsageError(
            f"--url {shown_url(url)!r}: the port is not a number from 0 to 65535 (a password with "
            "`#`, `?`, `/` or `@` in it must be percent-encoded, or given with --api-key)"
        )
    if parts.query or parts.fragment:
        raise UsageError(f"--url {shown_url(url)}: give the server's address without a query or fragment")
    path = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class Limits:
    """How long and how much one request may take."""

    max_tokens: int
    run_s: float = 600.0  # the whole request, first byte to last
    connect_s: float = 10.0
    silence_s: float = 120.0  # the longest wait for the next byte, within run_s

    @property
    def read_s(self) -> float:
        return min(self.silence_s, self.run_s)

    @property
    def max_bytes(self) -> int:
        return (256 << 10) + self.max_tokens * BYTES_PER_TOKEN

    @property
    def max_events(self) -> int:
        """Events carrying text: a token each at most, so twice max_tokens means the server ignores it."""
        return 2 * self.max_tokens + 64


@dataclass
class _Stream:
    """What a stream said so far."""

    first: float | None = None
    last: float | None = None
    events: int = 0
    finished: bool = False
    done: bool = False
    body: dict[str, Any] = field(default_factory=dict)


class Server:
    """One server, one connection pool; use as a context manager."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        limits: Limits,
        clock: Callable[[], float] = time.monotonic,
        transport: Any = None,
    ) -> None:
        import httpx  # bench alone needs it: other commands do not pay for its import

        self.base = base_url(url)
        self.shown = shown_url(self.base)
        self.limits = limits
        self.clock = clock
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._key = Shown(api_key)  # what the server echoes is cut for messages: never inside the key
        self._http = httpx.Client(
            base_url=self.base,
            headers=headers,
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(connect=limits.connect_s, read=limits.read_s, write=limits.connect_s, pool=5.0),
        )

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    # ------------------------------------------------------------------------------------------ requests

    def _failed(self, method: str, path: str, exc: Exception) -> BenchError:
        import httpx

        where = f"{self.shown}: {method} {path}"
        if isinstance(exc, httpx.ConnectTimeout):
            return BenchError(
                f"{where}: no connection within {self.limits.connect_s:g} s: is the address right and the server up?"
            )
        if isinstance(exc, httpx.ConnectError):
            return BenchError(f"{where}: cannot connect ({exc}): is the server running on that address and port?")
        if isinstance(exc, httpx.ReadTimeout):
            return BenchError(f"{where}: the server sent nothing for {self.limits.read_s:g} s")
        if isinstance(exc, httpx.RemoteProtocolError):
            return BenchError(f"{where}: the server broke the HTTP exchange ({exc}): not an HTTP server, or it crashed")
        return BenchError(f"{where}: {type(exc).__name__}: {printable(str(exc)[:200])}")

    def _status(self, method: str, path: str, status: int, text: bytes) -> BenchError:
        where = f"{self.shown}: {method} {path}"
        if status in (401, 403):
            return BenchError(f"{where}: HTTP {status}: the server wants an API key (--api-key, or OLARESPACK_API_KEY)")
        said = printable(self._key.cut(text.decode("utf-8", errors="replace"), 300).strip())
        return BenchError(
            f"{where}: HTTP {status}: not an OpenAI-compatible server, or it refused the request"
            + (f" ({said})" if said else "")
        )

    def _get(self, path: str, max_bytes: int, cut: bool = False) -> tuple[int, bytes, bool]:
        """The status, the body and whether it is whole: past max_bytes the body is refused, or with `cut`
        returned as far as max_bytes, marked not whole."""
        import httpx

        deadline = self.clock() + self.limits.run_s
        try:
            with self._http.stream("GET", path) as answer:
                data = bytearray()
                for piece in answer.iter_bytes():
                    data += piece
                    if len(data) > max_bytes:
                        if cut:
                            return answer.status_code, bytes(data[:max_bytes]), False
                        raise BenchError(f"{self.shown}: GET {path}: the answer is over {max_bytes >> 20} MiB")
                    if self.clock() > deadline:
                        raise BenchError(f"{self.shown}: GET {path}: no answer within {self.limits.run_s:g} s")
                return answer.status_code, bytes(data), True
        except httpx.HTTPError as exc:
            raise self._failed("GET", path, exc) from None

    def models(self) -> list[str]:
        """The model names the server serves (GET /v1/models): the check that it speaks the OpenAI API at all."""
        status, data, _ = self._get(MODELS, MAX_TEXT)
        if status != 200:
            raise self._status("GET", MODELS, status, data)
        try:
            listed = loads(data)
        except ValueError as exc:
            raise BenchError(
                f"{self.shown}: GET {MODELS}: the answer is not an OpenAI model list ({exc}): not an "
                "OpenAI-compatible server"
            ) from None
        items = listed.get("data") if isinstance(listed, dict) else None
        names = (
            [str(i["id"]) for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)]
            if isinstance(items, list)
            else None
        )
        if not names:
            raise BenchError(
                f'{self.shown}: GET {MODELS}: the answer is not an OpenAI model list ({{"data": '
                '[{"id": ...}]}): not an OpenAI-compatible server'
            )
        kept = [name for name in names if len(name) <= MAX_MODEL_ID]
        if not kept:  # every id would be printed, sent and recorded in full
            raise BenchError(
                f"{self.shown}: GET {MODELS}: model ids of {', '.join(str(len(n)) for n in names[:5])} "
                f"characters: not model ids (at most {MAX_MODEL_ID})"
            )
        return kept

    def text(self, path: str, max_bytes: int = MAX_TEXT) -> tuple[str | None, bool]:
        """A text resource (the engine's /metrics), None when the server has none there, and whether it was read
        whole: past max_bytes only its start is kept (its caller says what that leaves out)."""
        status, data, whole = self._get(path, max_bytes, cut=True)
        if status in (404, 405, 501):
            return None, True
        if status != 200:
            raise self._status("GET", path, status, data)
        return data.decode("utf-8", errors="replace"), whole

    def complete(self, body: dict[str, Any]) -> Reply:
        """POST one chat completion and read it to its end (streamed or not), within the limits."""
        import httpx

        start = self.clock()
        stream = bool(body.get("stream"))
        try:
            with self._http.stream("POST", COMPLETIONS, json=body) as answer:
                if answer.status_code != 200:  # the start of its body says why; the rest is never read
                    raise self._status("POST", COMPLETIONS, answer.status_code, _first_bytes(answer.iter_bytes()))
                pieces = self._bounded(answer.iter_bytes(), start)
                reply = self._read_stream(pieces, start) if stream else self._read_whole(pieces, start)
        except httpx.HTTPError as exc:
            raise self._failed("POST", COMPLETIONS, exc) from None
        return reply

    def _bounded(self, pieces: Iterator[bytes], start: float) -> Iterator[tuple[bytes, float]]:
        total = 0
        for piece in pieces:
            now = self.clock()
            total += len(piece)
            if total > self.limits.max_bytes:
                raise BenchError(
                    f"{self.shown}: POST {COMPLETIONS}: over {self.limits.max_bytes >> 10} KiB for "
                    f"max_tokens {self.limits.max_tokens}: the server ignores max_tokens"
                )
            if now - start > self.limits.run_s:
                raise BenchError(
                    f"{self.shown}: POST {COMPLETIONS}: the completion did not end within "
                    f"{self.limits.run_s:g} s (--run-timeout)"
                )
            yield piece, now

    def _read_whole(self, pieces: Iterator[tuple[bytes, float]], start: float) -> Reply:
        data, end = bytearray(), start
        for piece, now in pieces:
            data += piece
            end = now
            if len(data) > MAX_JSON:
                raise BenchError(f"{self.shown}: POST {COMPLETIONS}: the answer is over {MAX_JSON >> 20} MiB")
        try:
            answer = loads(data)
        except ValueError as exc:
            raise BenchError(
                f"{self.shown}: POST {COMPLETIONS}: the answer is not JSON olarespack reads ({exc}): "
                "not an OpenAI-compatible server"
            ) from None
        return reply_of(answer, self.limits.max_tokens, f"{self.shown}: POST {COMPLETIONS}", end - start, self._key)

    def _read_stream(self, pieces: Iterator[tuple[bytes, float]], start: float) -> Reply:
        where = f"{self.shown}: POST {COMPLETIONS}"
        state = _Stream()
        buffer = bytearray()
        for piece, now in pieces:
            buffer += piece
            while (end := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:end]).rstrip(b"\r")
                del buffer[: end + 1]
                self._event(line, now - start, state, where)
                if state.done:
                    return self._streamed(state, where, now - start)
            if len(buffer) > MAX_LINE:
                raise BenchError(f"{where}: a stream line is over {MAX_LINE >> 10} KiB: not a server-sent event stream")
        if not state.finished:
            raise BenchError(f"{where}: the stream ended before the completion finished (no finish_reason, no [DONE])")
        return self._streamed(state, where, self.clock() - start)

    def _event(self, line: bytes, at: float, state: _Stream, where: str) -> None:
        if not line.startswith(b"data:"):
            return  # comments, event names and blank separators carry nothing
        data = line[5:].strip()
        if data == b"[DONE]":
            state.done = True
            return
        try:
            event = loads(data)
        except ValueError as exc:
            raise BenchError(
                f"{where}: a streamed event is not JSON olarespack reads ({exc}): not an OpenAI-compatible stream"
            ) from None
        if not isinstance(event, dict):
            raise BenchError(f"{where}: a streamed event is not a JSON object")
        if "error" in event:
            said = printable(self._key.cut(str(event["error"]), 300))
            raise BenchError(f"{where}: the server reported an error mid-stream: {said}")
        choices = event.get("choices")
        if not isinstance(choices, list):
            raise BenchError(f"{where}: a streamed event has no choices list: not an OpenAI-compatible stream")
        if choices and text_of(choices[0]):
            state.first = at if state.first is None else state.first
            state.last = at
            state.events += 1
            if state.events > self.limits.max_events:
                raise BenchError(
                    f"{where}: over {self.limits.max_events} text events for max_tokens "
                    f"{self.limits.max_tokens}: the server ignores max_tokens"
                )
        if choices and isinstance(choices[0], dict) and choices[0].get("finish_reason"):
            state.finished = True
        for key in ("usage", "timings"):
            if event.get(key) is not None:
                state.body[key] = event[key]

    def _streamed(self, state: _Stream, where: str, seconds: float) -> Reply:
        if "usage" not in state.body:
            raise BenchError(
                f"{where}: the stream carried no usage: the server ignored stream_options.include_usage "
                "(measure with --no-stream)"
            )
        completion, prompt = check_usage(state.body["usage"], self.limits.max_tokens, where)
        return Reply(completion, prompt, seconds, state.first, state.last, state.body)
