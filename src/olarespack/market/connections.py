"""What `olarespack serve`'s connections are held to, apart from HTTP itself (market/protocol.py speaks that):
the limits a server is started with, the cap's default from the process's file limit, the lingering close of
a connection's socket (RFC 9112 section 9.6), and the event loop's one line for a failing accept()."""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("olarespack.serve")


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1000
    request_seconds: float = 10.0  # to send a whole request, head and body
    keep_alive_seconds: int = 15  # idle time allowed between requests (uvicorn's timeout_keep_alive)
    response_seconds: float = 30.0  # for the client to take its answer, from the request's head
    max_requests: int = 100  # on one connection, pipelined or kept alive; then it closes
    # A connection closed by the server may take this long to take its last answer, then it is cut:
    # a client that stops reading must not keep the socket and its unsent buffer.
    linger_seconds: float = 2.0

    def __post_init__(self) -> None:
        if (
            self.max_connections < 1
            or self.request_seconds <= 0
            or self.keep_alive_seconds < 1
            or self.linger_seconds <= 0
            or self.response_seconds <= 0
            or self.max_requests < 1
        ):
            raise ValueError(f"connection limits must be positive: {self}")


def default_max_connections(ceiling: int = 1000) -> int:
    """The cap unless told otherwise: 1000, or fewer when the process may not open that many files (a
    connection over the file limit would fail in accept(), before the cap could evict anyone)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return ceiling
    return max(1, min(ceiling, soft - 64))  # room for the listening socket, logs, chart and icon reads


class AcceptErrors:
    """The event loop's exception handler for `accept()` failing for want of descriptors or memory: one line a
    second with how many failed since, never a traceback each (asyncio's accept loop reports every try of
    its backlog, thousands a second). Every other loop error goes to asyncio's own handler."""

    def __init__(self) -> None:
        self.last = float("-inf")
        self.unsaid = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            loop.default_exception_handler(context)
            return
        self.unsaid += 1
        if loop.time() - self.last < 1.0:
            return
        exc = context.get("exception")
        log.warning(
            "accept failed %d time(s): %s; new connections wait in the backlog",
            self.unsaid,
            getattr(exc, "strerror", None) or type(exc).__name__,
        )
        self.last, self.unsaid = loop.time(), 0


class LingeringTransport:
    """A connection's transport whose close() is a lingering close (see the module docstring); everything else
    is the transport's own. abort() still cuts at once."""

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        linger_seconds: float,
        on_linger: Callable[[], None],
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._linger_seconds = linger_seconds
        self._on_linger = on_linger
        self._cut: asyncio.TimerHandle | None = None
        self.lingering = False

    def close_now(self) -> None:
        """A plain close: what is buffered goes out, then the socket closes (for a client that has sent all it
        will: nothing unread is left to reset the connection)."""
        self.forget()
        self._transport.close()

    def close(self) -> None:
        if self.lingering or self._transport.is_closing():
            return
        self.lingering = True
        if self._transport.can_write_eof():
            self._transport.write_eof()  # after what is buffered: the answer goes out first
            if not self._transport.is_reading():
                self._transport.resume_reading()  # the client's last bytes must be read, or they reset the socket
        else:
            self._transport.close()  # no half-close on this transport: a plain close
        # either way a client that stops reading does not keep the socket and its unsent answer
        self._cut = self._loop.call_later(self._linger_seconds, self.abort)
        self._on_linger()

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def abort(self) -> None:
        self.forget()
        self._transport.abort()

    def forget(self) -> None:
        """The connection is gone (or cut): no timer left behind."""
        if self._cut is not None:
            self._cut.cancel()
            self._cut = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
