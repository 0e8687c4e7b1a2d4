"""The market server's outermost layer (market/serve.py wraps its app in it): CORS on every answer and on
preflights, and one access log line per request, whatever happens to it."""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from olarespack.market import answers
from olarespack.market import catalog as market
from olarespack.market.protocol import ABORTED_KEY, access_log

log = logging.getLogger("olarespack.serve")


class AccessLogAndCors:
    """CORS on every answer (and preflights), and one log line per request, whatever happens to it: a
    client that goes away mid-request is logged as 499, a request the protocol cut off with the status
    it was given (ABORTED_KEY), a bug as 500 with its traceback; nothing is raised past this point, so
    neither Starlette nor uvicorn logs a request a second time. Plain ASGI: no per-request task or body
    buffering, unlike BaseHTTPMiddleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.cors = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in answers.CORS]
        self.preflight = answers.PREFLIGHT_STATUS
        status, text = answers.failure("internal")
        self.internal = (status, market.served_json({"error": text}))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status, size, note = 0, 0, ""

        async def send_with_cors(message: Message) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), *self.cors]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            if scope["method"] == "OPTIONS":
                await send_with_cors({"type": "http.response.start", "status": self.preflight, "headers": []})
                await send_with_cors({"type": "http.response.body", "body": b""})
            else:
                await self.app(scope, receive, send_with_cors)
        except ClientDisconnect:
            status, note = 499, "client disconnected"
        except asyncio.CancelledError:
            status, note = status or 503, "cancelled at shutdown"
            raise
        except Exception:
            log.exception("internal error on %s %s", scope["method"], scope["path"][:200])
            note = "internal error"
            if not status:
                status, body = self.internal
                await send_with_cors(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [(b"content-type", answers.JSON_TYPE.encode())],
                    }
                )
                await send_with_cors({"type": "http.response.body", "body": body})
        finally:
            status, note = scope.get(ABORTED_KEY, (status, note))
            target = scope.get("raw_path") or scope["path"].encode("utf-8")
            if scope.get("query_string"):
                target += b"?" + scope["query_string"]
            # repr() escapes control bytes, so a crafted URL cannot forge log lines
            access_log(
                scope.get("client"),
                f"{scope['method']} {repr(target)[2:-1]}",
                status,
                size,
                time.perf_counter() - started,
                note,
            )
