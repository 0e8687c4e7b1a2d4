"""The market source over HTTP: a Starlette app that uvicorn runs.

What a box asks, and how the answer is picked:
- `GET {v1,v2}/appstore/hash|info?version=V`, `POST {v1,v2}/applications/info` with `{"app_ids", "version"}`
  and `GET {v1,v2}/applications/<name>/chart?fileName=<name>-<x.y.z>.tgz[&version=V]`. The Olares version V
  picks the manifest generation (1.12.3-1.12.5 legacy, 1.12.6+ current); without one, current is served.
  The two generations' archives share file names and live in charts/<generation>/; a chart download
  without `version` gets the current archive. The hash/info answers echo V because the box adopts that
  `version` for its detail requests.
- `/current/...` and `/legacy/...` are the same API pinned to one generation, for boxes that should be
  given one generation whatever they send (use `http://host:port/legacy` as the source URL).
- `/icons/<file>` and `/health`.

Answers are JSON bytes built once per catalog load (the version is spliced in, not re-serialized), so a
request costs a dict lookup and a concatenation. Only files indexed at load time, inside the market
folder, are ever sent: a request names a key, never a path. The catalog is re-read when publish replaces
catalog.json; the new state is built aside and swapped in one assignment.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import mimetypes
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from olarespack import market
from olarespack.errors import OlaresPackError, UsageError
from olarespack.render import GenerationName, generation_for_olares

log = logging.getLogger("olarespack.serve")

MAX_BODY: Final = 16 * 1024  # ten ids and a version fit in well under 1 KiB
MAX_IDS: Final = 10  # what Olares' syncer sends per batch
DEFAULT_GENERATION: Final[GenerationName] = "current"
JSON_TYPE: Final = "application/json"
CORS: Final = [(b"access-control-allow-origin", b"*"), (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
               (b"access-control-allow-headers", b"Content-Type"), (b"access-control-max-age", b"86400")]
_SENTINEL: Final = "\x00olarespack-version\x00"
_CHART_RE: Final = re.compile(r"^([a-z0-9]{1,30})-(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]*)?)\.tgz$")
_ICON_RE: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\.(png|jpe?g|webp|svg|gif|ico)$")


class CatalogError(OlaresPackError):
    """The market folder's catalog cannot be used."""


class MissingCatalogError(CatalogError):
    """No catalog at all: the command was pointed at the wrong folder, or publish has not run."""

    exit_code = 2


@dataclass(frozen=True)
class GenerationView:
    hash_parts: tuple[bytes, bytes]  # the answer before and after the echoed version
    info_parts: tuple[bytes, bytes]
    default_version: str
    details: dict[str, bytes]  # app id -> its entry, serialized
    charts: dict[str, tuple[str, Path]]  # archive file name -> (app name, file)
    latest: dict[str, str]  # app name -> file name of its current archive
    hash: str
    apps: int


@dataclass(frozen=True)
class MarketState:
    generations: dict[str, GenerationView]
    icons: dict[str, Path]
    stamp: tuple[int, int, int]


def _split(answer: bytes) -> tuple[bytes, bytes]:
    before, after = answer.split(json.dumps(_SENTINEL).encode("ascii"))
    return before, after


def _files(folder: Path, root: Path, pattern: re.Pattern[str]) -> dict[str, Path]:
    """Regular files in `folder` whose name matches and whose real path stays inside `root`."""
    if not folder.is_dir():
        return {}
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        real = path.resolve()
        if pattern.match(path.name) and real.is_file() and real.is_relative_to(root):
            found[path.name] = real
    return found


def _stamp(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size, info.st_ino


def load_state(market_dir: Path) -> MarketState:
    """Read catalog.json and index the archives and icons; everything a request needs, precomputed."""
    root = market_dir.resolve()
    path = root / market.CATALOG_FILE
    try:
        stamp = _stamp(path)
        catalog = json.loads(path.read_bytes())
    except FileNotFoundError:
        hint = f"run `olarespack publish --market-dir {market_dir}` first"
        raise MissingCatalogError(f"{path}: no catalog; {hint}") from None
    except (OSError, ValueError) as exc:
        raise CatalogError(f"{path}: unreadable catalog: {exc}") from None
    if not isinstance(catalog, dict) or catalog.get("format") != market.FORMAT:
        raise CatalogError(f"{path}: not an olarespack catalog (format {market.FORMAT})")
    try:
        views = {name: _view(root, name, gen) for name, gen in catalog["generations"].items()}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CatalogError(f"{path}: malformed catalog ({type(exc).__name__}: {exc})") from None
    icons = _files(root / market.ICONS_DIR, root, _ICON_RE)
    return MarketState(views, icons, stamp)


def _view(root: Path, name: str, gen: dict[str, Any]) -> GenerationView:
    charts = {file: (match.group(1), real) for file, real in
              _files(root / market.CHARTS_DIR / name, root, _CHART_RE).items()
              if (match := _CHART_RE.match(file))}
    return GenerationView(
        hash_parts=_split(market.served_json(market.hash_answer(gen, _SENTINEL))),
        info_parts=_split(market.served_json(market.info_answer(gen, _SENTINEL))),
        default_version=str(gen["olares_version"]),
        details={ident: market.served_json(entry) for ident, entry in gen["details"].items()},
        charts=charts, latest=dict(gen["charts"]), hash=str(gen["hash"]), apps=len(gen["apps"]),
    )


class Store:
    """The state requests read; replaced whole when catalog.json changes."""

    def __init__(self, market_dir: Path) -> None:
        self.market_dir = market_dir
        self.state = load_state(market_dir)
        self._failed: tuple[int, int, int] | None = None

    def changed(self) -> bool:
        try:
            stamp = _stamp(self.market_dir / market.CATALOG_FILE)
        except OSError:
            return False  # keep serving the last good catalog while the file is away
        return stamp not in (self.state.stamp, self._failed)

    def reload(self) -> None:
        try:
            state = load_state(self.market_dir)
        except CatalogError as exc:
            with contextlib.suppress(OSError):  # remembered so a bad file is reported once, not every poll
                self._failed = _stamp(self.market_dir / market.CATALOG_FILE)
            log.error("keeping the previous catalog: %s", exc)
            return
        self.state = state  # one reference swap: a request sees the old state or the new one
        hashes = ", ".join(f"{g} {v.hash} ({v.apps} apps)" for g, v in state.generations.items())
        log.info("catalog loaded: %s", hashes)

    async def watch(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                if self.changed():
                    await anyio.to_thread.run_sync(self.reload)
            except Exception:  # the watcher must outlive any one bad reload
                log.exception("catalog reload failed; keeping the previous catalog")


# --------------------------------------------------------------------------- requests


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=JSON_TYPE)


def _fail(status: int, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


@functools.lru_cache(maxsize=1024)  # bounded: versions come from clients
def _generation(version: str) -> GenerationName | None:
    if len(version) > 40:
        return None
    try:
        return generation_for_olares(version)
    except UsageError:
        return None


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise _fail(413, f"body: at most {MAX_BODY} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise _fail(413, f"body: at most {MAX_BODY} bytes")
    return bytes(data)


def _ids_and_version(body: bytes) -> tuple[list[str], str | None]:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # deep nesting exhausts the C decoder's stack
        raise _fail(400, 'body: not JSON; send {"app_ids": ["<id>", ...], "version": "1.12.6"}') from None
    if not isinstance(payload, dict):
        raise _fail(400, 'body: expected a JSON object {"app_ids": [...], "version": "..."}')
    ids = payload.get("app_ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise _fail(400, "app_ids: expected a list of app id strings")
    if len(ids) > MAX_IDS:
        raise _fail(400, f"app_ids: at most {MAX_IDS} ids per request, got {len(ids)}")
    version = payload.get("version")
    if version is not None and not isinstance(version, str):
        raise _fail(400, "version: expected a string like 1.12.6")
    return list(dict.fromkeys(ids)), version or None


class Api:
    """The endpoints, reading the store's current state at the start of each request."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _view(self, version: str | None, pinned: GenerationName | None) -> tuple[GenerationView, bytes]:
        generation = pinned or DEFAULT_GENERATION
        if version:
            found = _generation(version)
            if found is None:
                raise _fail(400, f"version: {version[:40]!r} is not an Olares version 1.12.3 or later")
            generation = pinned or found
        view = self.store.state.generations.get(generation)
        if view is None:
            raise _fail(404, f"this market publishes no {generation} generation")
        return view, json.dumps(version or view.default_version).encode("utf-8")

    def routes(self, pinned: GenerationName | None) -> list[BaseRoute]:
        async def hash_(request: Request) -> Response:
            view, version = self._view(request.query_params.get("version"), pinned)
            return _json(view.hash_parts[0] + version + view.hash_parts[1])

        async def info(request: Request) -> Response:
            view, version = self._view(request.query_params.get("version"), pinned)
            return _json(view.info_parts[0] + version + view.info_parts[1])

        async def details(request: Request) -> Response:
            ids, asked = _ids_and_version(await _body(request))
            view, version = self._view(asked, pinned)
            found = [(i, view.details[i]) for i in ids if i in view.details]
            missing = [i for i in ids if i not in view.details]
            apps = b",".join(json.dumps(i).encode("utf-8") + b":" + entry for i, entry in found)
            return _json(b'{"apps":{' + apps + b'},"version":' + version + b',"not_found":'
                         + json.dumps(missing).encode("utf-8") + b"}")

        async def chart(request: Request) -> Response:
            view, _ = self._view(request.query_params.get("version"), pinned)
            name = request.path_params["name"]
            file_name = request.query_params.get("fileName") or view.latest.get(name, "")
            owner, path = view.charts.get(file_name, ("", None))
            if path is None or owner != name:
                raise _fail(404, f"no chart {file_name[:80]!r} for app {name[:40]!r}")
            try:
                data = await anyio.to_thread.run_sync(path.read_bytes)
            except OSError:
                raise _fail(404, f"chart {file_name!r} is gone") from None
            return Response(data, media_type="application/gzip",
                            headers={"content-disposition": f'attachment; filename="{file_name}"'})

        routes: list[BaseRoute] = []
        for api in ("/api/v1", "/api/v2"):
            routes += [
                Route(f"{api}/appstore/hash", hash_, methods=["GET"]),
                Route(f"{api}/appstore/info", info, methods=["GET"]),
                Route(f"{api}/applications/info", details, methods=["POST"]),
                Route(f"{api}/applications/{{name}}/chart", chart, methods=["GET"]),
            ]
        return routes

    async def icon(self, request: Request) -> Response:
        path = self.store.state.icons.get(request.path_params["file"])
        if path is None:
            raise _fail(404, "no such icon")
        try:
            data = await anyio.to_thread.run_sync(path.read_bytes)
        except OSError:
            raise _fail(404, "no such icon") from None
        media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return Response(data, media_type=media, headers={"cache-control": "public, max-age=3600"})

    async def health(self, request: Request) -> Response:
        state = self.store.state
        body = {"status": "ok", "generations": {g: {"hash": v.hash, "apps": v.apps, "charts": len(v.charts)}
                                                for g, v in state.generations.items()},
                "icons": len(state.icons)}
        return _json(market.served_json(body))


async def _error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    return _json(market.served_json({"error": detail}), status)


class AccessLogAndCors:
    """CORS on every answer (and preflights), and one log line per request. Plain ASGI: no per-request
    task or body buffering, unlike BaseHTTPMiddleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status, size = 0, 0

        async def send_with_cors(message: Message) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), *CORS]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            if scope["method"] == "OPTIONS":
                await send_with_cors({"type": "http.response.start", "status": 204, "headers": []})
                await send_with_cors({"type": "http.response.body", "body": b""})
            else:
                await self.app(scope, receive, send_with_cors)
        except Exception:
            status = status or 500  # the error page is sent outside this middleware
            raise
        finally:
            target = scope.get("raw_path") or scope["path"].encode("utf-8")
            if scope.get("query_string"):
                target += b"?" + scope["query_string"]
            client = scope.get("client") or ("-", 0)
            # repr() escapes control bytes, so a crafted URL cannot forge log lines
            log.info('%s "%s %s" %d %d %.2fms', client[0], scope["method"], repr(target)[2:-1], status, size,
                     (time.perf_counter() - started) * 1000)


def create_app(market_dir: Path, poll_seconds: float = 1.0) -> Starlette:
    store = Store(market_dir)
    api = Api(store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher = asyncio.create_task(store.watch(poll_seconds))
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    routes: list[BaseRoute] = [
        *api.routes(None),
        *(Mount(f"/{gen}", routes=api.routes(gen)) for gen in market.GENERATION_NAMES),
        Route("/icons/{file}", api.icon, methods=["GET"]),
        Route("/health", api.health, methods=["GET"]),
        Route("/healthz", api.health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(AccessLogAndCors)],
                    exception_handlers={HTTPException: _error, Exception: _error})
    app.state.store = store
    return app


def run(market_dir: Path, host: str, port: int, poll_seconds: float = 1.0) -> None:
    """Serve until interrupted. Logging is configured by the caller; uvicorn's access log is off because
    AccessLogAndCors writes one richer line per request."""
    app = create_app(market_dir, poll_seconds)
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, server_header=False,
        proxy_headers=False, timeout_keep_alive=15, limit_concurrency=2048, backlog=2048,
        h11_max_incomplete_event_size=16 * 1024, timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run()
