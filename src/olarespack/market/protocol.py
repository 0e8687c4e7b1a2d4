"""HTTP/1.1 connections for `olarespack serve`: uvicorn's h11 protocol with a request deadline and a
connection cap that idle or slow clients cannot use to lock the server.

Plain uvicorn (0.54) gives a client all the time it wants to send a request (there is no deadline for
the head or the body), and its limit_concurrency answers 503 to new requests once enough connections are
open, however idle they are: a few thousand connections that never finish their headers lock every box
out, and a client trickling a byte every few seconds holds its connection for ever. GuardedH11Protocol:
- gives every request a deadline (ConnectionLimits.request_seconds), counted from the connection's
  opening for its first request and from the first byte for later ones on a kept-alive connection. A
  request (head and body) not complete by then is answered 408 and its connection closed, so sending
  slowly does not help. A connection that never sent a byte is closed without an answer.
- keeps uvicorn's keep-alive timer: an idle kept-alive connection is closed after keep_alive_seconds.
- gives every answer a deadline too (ConnectionLimits.response_seconds, from the request's head): a client
  that does not read what it asked for is cut like one that does not send, so its answer and what it
  pipelined behind it (kernel buffers of megabytes) do not stay. A connection serves at most
  max_requests requests (pipelined or kept alive), then closes after its last answer.
- caps the connections (max_connections), counting every socket the server holds, closing ones included
  (a socket lingering after its last answer is a descriptor too: over the process's file limit accept()
  fails before the cap can evict anyone). A connection over the cap evicts the one that has waited
  longest without a request in flight (idle, still sending its request, or closing), else the one whose
  client stopped reading its answer longest ago, so holding connections open does not keep new clients out.
  Only when every connection has a request in flight that its client reads is the new one answered 503 at
  once.
- refuses a request whose body framing is ambiguous (both Transfer-Encoding and Content-Length: h11 frames
  it by the first) with a 400 before the app sees it, and closes the connection after every framing error
  (RFC 9112 section 6.1: a server must close after such a request, or a proxy in front and this server
  could split the stream differently and answer a smuggled request). Nothing pipelined after it is read.
- closes as RFC 9112 section 9.6 asks (a lingering close): the last answer is sent, only the sending side
  is shut, and what the client still sends is read and dropped until it closes or linger_seconds pass. A
  plain close with unread bytes makes the kernel reset the connection, and the reset can destroy the answer
  before the client reads it (a 413 to a body still being sent).
- writes one access-log line for each request it answers itself (408, 503, 400) and silences uvicorn's
  own per-request warnings, so no client makes the server write more than one line per request. A
  request the app is handling is logged by the app, which reads why it was cut off from the scope
  (ABORTED_KEY).

It relies on H11Protocol internals (conn and how it is made, cycle, transport, on_response_complete, send_400_response,
the RequestResponseCycle fields): it is written against uvicorn 0.54 and h11 0.16.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
from typing import Any, ClassVar, Final, cast

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

from olarespack.market.connections import ConnectionLimits, LingeringTransport

log = logging.getLogger("olarespack.serve")
# uvicorn warns once per malformed request or unsupported upgrade, on top of the access line: keep its
# errors (an exception in the app is a bug worth a traceback), drop the per-request chatter.
_UVICORN_LOG: Final = logging.getLogger("olarespack.serve.h11")
_UVICORN_LOG.setLevel(logging.ERROR)
# Set in a request's scope when the connection was cut under the app: (status, why) for its log line.
ABORTED_KEY: Final = "olarespack.aborted"
MAX_HEAD_BYTES: Final = 16 * 1024  # a request head (line and headers); h11 answers 400 past it
_CLOSE: Final = (b"connection", b"close")
STALL_SECONDS: Final = 1.0  # an answer not drained for this long: its client is not reading it


def access_log(
    client: tuple[str, int] | None, request: str, status: int, size: int, elapsed: float, note: str = ""
) -> None:
    """The one line per request, for the app's answers and the protocol's alike (`elapsed` in seconds)."""
    log.info(
        '%s "%s" %d %d %.2fms%s',
        client[0] if client else "-",
        request,
        status,
        size,
        elapsed * 1000,
        f" {note}" if note else "",
    )


def _raw_answer(status: int, message: str) -> bytes:
    """A complete closing answer, written straight to the socket: for the moments h11 has no request to
    answer (an unfinished head) or the app must not answer any more."""
    body = json.dumps({"error": message}).encode("ascii")
    head = (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _cut_under_app(cycle: RequestResponseCycle, status: int, note: str) -> None:
    """Stop the app's request: its reads see a disconnect and its writes go nowhere; its log line says why."""
    cast(dict[str, Any], cycle.scope)[ABORTED_KEY] = (status, note)
    cycle.disconnected = True
    cycle.message_event.set()


class _FramingError(h11.RemoteProtocolError):
    """A request head h11 accepts but this server refuses to frame (see the module docstring)."""


class _StrictConnection(h11.Connection):
    """h11's server side, refusing a request that carries both Transfer-Encoding and Content-Length: uvicorn
    answers an h11.RemoteProtocolError with send_400_response, which closes the connection."""

    refused: str | None = None  # why the last request was refused, for its log line

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request):
            names = {name for name, _ in event.headers}  # h11 lower-cases header names
            if b"transfer-encoding" in names and b"content-length" in names:
                self.refused = "both Transfer-Encoding and Content-Length"
                raise _FramingError(self.refused, error_status_hint=400)
        return event


class _Pool:
    """One server's connections: those counted against the cap, and those that may be evicted (no request
    in flight), in the order they started waiting, oldest first."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.live: set[GuardedH11Protocol] = set()  # every socket held, closing ones included
        self.lingering: dict[GuardedH11Protocol, None] = {}  # closing: answer out, socket still held
        self.evictable: dict[GuardedH11Protocol, None] = {}  # no request in flight, insertion-ordered
        self.stalled: dict[GuardedH11Protocol, float] = {}  # answers not drained -> since when (loop time)

    def admit(self, conn: GuardedH11Protocol) -> bool:
        self.live.add(conn)
        if len(self.live) <= self.limits.max_connections:
            return True
        # the cheapest to cut first: a closing socket has given its answer already
        victim = next(iter(self.lingering), None) or next(iter(self.evictable), None) or self._stalled_longest()
        if victim is None:
            return False
        victim.evict()
        return True

    def _stalled_longest(self) -> GuardedH11Protocol | None:
        """The connection whose client has not taken its answer for longest, if that is over STALL_SECONDS (a
        big answer pauses writing for a moment even for a client that reads)."""
        conn = next(iter(self.stalled), None)
        if conn is None or conn.loop.time() - self.stalled[conn] < STALL_SECONDS:
            return None
        return conn

    def gone(self, conn: GuardedH11Protocol) -> None:
        self.live.discard(conn)
        self.lingering.pop(conn, None)
        self.evictable.pop(conn, None)
        self.stalled.pop(conn, None)


class GuardedH11Protocol(H11Protocol):
    """See the module docstring. Bound to one server's pool by protocol_class()."""

    pool: ClassVar[_Pool]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.logger = _UVICORN_LOG
        self.conn = _StrictConnection(h11.SERVER, config.h11_max_incomplete_event_size or MAX_HEAD_BYTES)
        self._fresh = True  # no request head received yet on this connection
        self._started: float | None = None  # loop time the current request's clock started
        self._deadline: asyncio.TimerHandle | None = None
        self._answer_deadline: asyncio.TimerHandle | None = None  # the client must take its answer by then
        self._served = 0  # requests answered on this connection
        self._dropped = False  # closed by this class: nothing more to do (still counted until it is gone)

    # ------------------------------------------------------------------ uvicorn's hooks

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._lingering = LingeringTransport(transport, self.loop, self.pool.limits.linger_seconds, self._on_linger)
        super().connection_made(cast(asyncio.Transport, self._lingering))
        self._started = self.loop.time()
        self._deadline = self.loop.call_later(self.pool.limits.request_seconds, self._on_deadline)
        if not self.pool.admit(self):
            note = f"server busy: all {self.pool.limits.max_connections} connections have a request in flight"
            self._log(503, note)
            self._close(_raw_answer(503, "server busy, retry later"))
            return
        self._sync()

    def data_received(self, data: bytes) -> None:
        if self._dropped or self.transport.is_closing():
            return  # closed or closing: the rest is dropped (read, so that it does not reset the connection)
        if self._started is None and self.conn.their_state is h11.IDLE:
            self._started = self.loop.time()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        self._sync()

    def on_response_complete(self) -> None:
        self._served += 1
        if not self.transport.get_write_buffer_size():  # else the client has still to take it (resume_writing)
            self._cancel_answer_deadline()
        if self._served >= self.pool.limits.max_requests and not self._dropped:
            self._close()  # before uvicorn starts what was pipelined behind it: that is not read
        super().on_response_complete()  # may start a pipelined request
        self._sync()

    def pause_writing(self) -> None:
        super().pause_writing()
        if not self._dropped:
            self.pool.stalled.setdefault(self, self.loop.time())  # its client is not reading: evictable later

    def resume_writing(self) -> None:
        super().resume_writing()
        self.pool.stalled.pop(self, None)
        if self.cycle is None or self.cycle.response_complete:
            self._cancel_answer_deadline()  # the answer is taken (what is left is under the low-water mark)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._forget()
        self._lingering.forget()
        self.pool.gone(self)  # the socket is gone: it no longer counts against the cap

    def _on_linger(self) -> None:
        """Closing (uvicorn's close after a `Connection: close` answer, or ours): its answer is out and nothing
        more will be read from it; it still holds a socket, so it counts, and a new connection over the cap
        cuts it first."""
        self.pool.evictable.pop(self, None)
        self.pool.stalled.pop(self, None)
        if self in self.pool.live:
            self.pool.lingering[self] = None

    def send_400_response(self, msg: str) -> None:
        """h11 could not parse what the client sent, or _StrictConnection refused its framing (uvicorn calls
        this and has logged nothing of ours). The connection is closed after the answer, whatever follows."""
        cycle, refused = self.cycle, cast(_StrictConnection, self.conn).refused
        if refused is not None:  # a head the app never saw: the previous cycle, if any, is complete
            self._log(400, f"malformed request: {refused}")
        elif cycle is not None and not cycle.response_complete:  # a bad body under a running app
            _cut_under_app(cycle, 400, "malformed request body")  # the app writes the line
            if cycle.response_started:  # half an answer is out: nothing valid can follow it
                self._close()
                return
        elif self.conn.our_state is h11.IDLE:
            self._log(400, "malformed request")
        with contextlib.suppress(h11.LocalProtocolError):  # answered already; the rest of it is garbage
            super().send_400_response("Invalid HTTP request received.")
        self._close()

    # ------------------------------------------------------------------ state

    def _sync(self) -> None:
        """Re-derive the deadline and evictability from h11's state, after anything that may change it."""
        if self._dropped or self.transport.is_closing():
            return
        if self.cycle is not None:
            self._fresh = False
            if self._served + 1 >= self.pool.limits.max_requests:
                # the connection's last request: its answer says so (uvicorn adds `Connection: close` to the
                # answer of a request that carries it, and closes after it), so a client reconnects cleanly
                headers = cast(list[tuple[bytes, bytes]], self.cycle.scope["headers"])
                if _CLOSE not in headers:
                    headers.append(_CLOSE)
        # the client owes a request: the first one on a fresh connection, a head begun, or a body under way
        their = self.conn.their_state
        waiting = (self._fresh or self._has_head_bytes()) if their is h11.IDLE else their is h11.SEND_BODY
        if not waiting:
            self._started = None
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
        elif self._deadline is None:
            if self._started is None:  # a pipelined request whose bytes came while the previous one ran
                self._started = self.loop.time()
            self._unset_keepalive_if_required()  # a request has begun: the deadline governs, not idleness
            left = self._started + self.pool.limits.request_seconds - self.loop.time()
            self._deadline = self.loop.call_later(max(left, 0.0), self._on_deadline)
        if self.cycle is not None and not self.cycle.response_complete:
            self.pool.evictable.pop(self, None)  # a request in flight is evicted only when its client stalls
            if self._answer_deadline is None:
                self._answer_deadline = self.loop.call_later(
                    self.pool.limits.response_seconds, self._on_answer_deadline
                )
        elif self not in self.pool.evictable and self not in self.pool.lingering:
            self.pool.evictable[self] = None

    def _has_head_bytes(self) -> bool:
        return self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])

    def _on_deadline(self) -> None:
        self._deadline = None
        if self._dropped or self.transport.is_closing():
            return
        note = f"request not complete after {self.pool.limits.request_seconds:g}s"
        cycle = self.cycle
        if self.conn.their_state is h11.IDLE:
            if not self._has_head_bytes():
                self._close()  # never sent a byte: not a request, nothing to answer or log
                return
            self._log(408, note)
        elif cycle is not None and not cycle.response_started:
            _cut_under_app(cycle, 408, note)  # the app is waiting for the body; it writes the line
        else:
            self._close()  # answered already; the body nobody needs is still trickling in
            return
        self._close(_raw_answer(408, note))

    def _on_answer_deadline(self) -> None:
        self._answer_deadline = None
        if self._dropped or self.transport.is_closing():
            return
        self._cut_reader(f"answer not taken after {self.pool.limits.response_seconds:g}s")

    def _cut_reader(self, note: str) -> None:
        """The client asked and does not read the answer: the app's request ends (its line says why) and the
        socket is cut with what it still buffers."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            _cut_under_app(cycle, 408, note)
        else:
            self._log(408, note)
        self._forget()
        self.transport.abort()

    def _cancel_answer_deadline(self) -> None:
        if self._answer_deadline is not None:
            self._answer_deadline.cancel()
            self._answer_deadline = None

    def evict(self) -> None:
        """Make room for a new connection (called by the pool): a closing socket is cut, a stalled reader is cut,
        an idle or unfinished one is answered 503 (when it began a request) and closed at once. Its socket is
        no longer counted: it is gone within this turn of the loop."""
        self.pool.gone(self)
        if self.transport.is_closing():
            self._forget()
            self.transport.abort()  # closing already, still flushing or lingering: its answer was given
        elif (self.cycle is not None and not self.cycle.response_complete) or self.transport.get_write_buffer_size():
            # its answer is not taken: a close would wait for the client for ever, holding the socket
            self._cut_reader(
                f"evicted: {self.pool.limits.max_connections} connections open and this client does not read its answer"
            )
        else:
            if self._has_head_bytes():
                self._log(503, f"evicted: {self.pool.limits.max_connections} connections open")
                self.transport.write(_raw_answer(503, "server busy, retry later"))
            self._forget()
            self._lingering.close_now()

    def _close(self, answer: bytes = b"") -> None:
        self._forget()
        self._unset_keepalive_if_required()
        if not self.transport.is_closing():
            if answer:
                self.transport.write(answer)
            self.transport.close()  # a lingering close, cut after linger_seconds

    def _forget(self) -> None:
        """Closed by this class: no timer left, nothing more to guard; the socket counts until it is gone."""
        self._dropped = True
        self.pool.evictable.pop(self, None)  # a lingering close counts it as lingering (_on_linger)
        self.pool.stalled.pop(self, None)
        self._cancel_answer_deadline()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _log(self, status: int, note: str) -> None:
        """The access line of a request the app never saw (its method and target are unknown: "-")."""
        started = self.loop.time() if self._started is None else self._started
        access_log(self.client, "-", status, 0, self.loop.time() - started, note)


def protocol_class(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """A protocol class for one server (uvicorn.Config(http=...)): its connections share one pool."""

    class BoundGuardedH11Protocol(GuardedH11Protocol):
        pool = _Pool(limits)

    return BoundGuardedH11Protocol
