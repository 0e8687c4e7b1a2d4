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
- 1.12.7's sync (market/v2.py): `GET /api/v2/catalog?source_id=&version=`, `/api/v2/taxonomy`,
  `/api/v2/applications?page=&size=` and `/api/v2/browse/applications`, per generation like the rest.
- `/icons/<file>` and `/health`.

Every status, header, error text and limit below, and the Olares versions that pick a generation, come from
answers.py, which the exported Cloudflare Worker reads too (cloudflare.py): both answer alike by construction.

Answers are JSON bytes built once per catalog load: everything but the echoed `version` is serialized
once and the version is written in front of it (v1.VersionedAnswer, the same code that writes the
static files), so a request costs a dict lookup and a concatenation, and no catalog content can change
how an answer is put together. Only files indexed at load time, inside the market folder, are ever sent:
a request names a key, never a path; and each is read with state.read_inside, so a file or folder swapped
for a link (or a named pipe) after the load is answered as not found, never with what it points to.

The catalog is re-read when publish replaces catalog.json (serve_catalog.Store). A catalog that cannot
be loaded leaves the previous state in service and turns /health into 503 {"status": "stale", "error":
...} until a loadable one appears. load_state() (re-exported here from serve_catalog) is the pure check
behind both; publish can run it on the market it just wrote.

Connections (deadlines, the connection cap, idle clients) are serve_protocol's; one access-log line per
request is written here for what the app answers, there for what the protocol answers itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
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

from olarespack.core.errors import CatalogError, MissingCatalogError
from olarespack.market import answers
from olarespack.market import catalog as market
from olarespack.market.access import AccessLogAndCors
from olarespack.market.connections import AcceptErrors, ConnectionLimits, default_max_connections
from olarespack.market.protocol import MAX_HEAD_BYTES, protocol_class
from olarespack.market.state import GenerationView, MarketState, Store, load_state, read_listed
from olarespack.olares.generations import GENERATION_NAMES, GenerationName

__all__ = ["CatalogError", "MarketState", "MissingCatalogError", "create_app", "load_state", "make_server", "run"]
log = logging.getLogger("olarespack.serve")

# What Starlette's router raises on its own (no route, a route without this method): answered from the table.
_STARLETTE_FAILURES: Final = {404: "no_route", 405: "bad_method"}


# --------------------------------------------------------------------------- requests


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=answers.JSON_TYPE)


class Refusal(HTTPException):
    """An error answer of the shared table (answers.FAILURES), as opposed to one Starlette raises itself.
    `close`: the answer ends the connection (a body refused unread: what follows it is no request)."""

    close = False


def _fail(key: str, close: bool = False, **values: object) -> Refusal:
    status, text = answers.failure(key, **values)
    refusal = Refusal(status_code=status, detail=text)
    refusal.close = close
    return refusal


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > answers.MAX_BODY):
        raise _fail("body_too_big", close=True)
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > answers.MAX_BODY:
            raise _fail("body_too_big", close=True)
    return bytes(data)


def _ids_and_version(body: bytes) -> tuple[list[str], str | None]:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # deep nesting exhausts the C decoder's stack
        raise _fail("not_json") from None
    if not isinstance(payload, dict):
        raise _fail("not_object")
    ids = payload.get("app_ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise _fail("bad_ids")
    if len(ids) > answers.MAX_IDS:
        raise _fail("too_many_ids", count=len(ids))
    version = payload.get("version")
    if version is not None and not isinstance(version, str):
        raise _fail("bad_version_type")
    return list(dict.fromkeys(ids)), version or None


class Api:
    """The endpoints, reading the store's current state at the start of each request."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _view(self, version: str | None, pinned: GenerationName | None) -> tuple[GenerationView, str]:
        generation = pinned or answers.DEFAULT_GENERATION
        if version:
            found = answers.olares_generation(version)
            if found is None:
                raise _fail("bad_version", version=version)
            generation = pinned or found
        view = self.store.state.generations.get(generation)
        if view is None:
            raise _fail("no_generation", generation=generation)
        return view, version or view.default_version

    def routes(self, pinned: GenerationName | None) -> list[BaseRoute]:
        async def hash_(request: Request) -> Response:
            view, version = self._view(request.query_params.get(answers.QUERY["version"]), pinned)
            return _json(view.hash_answer.render(version))

        async def info(request: Request) -> Response:
            view, version = self._view(request.query_params.get(answers.QUERY["version"]), pinned)
            return _json(view.info_answer.render(version))

        async def details(request: Request) -> Response:
            ids, asked = _ids_and_version(await _body(request))
            view, version = self._view(asked, pinned)
            found = [(i, view.details[i]) for i in ids if i in view.details]
            missing = [i for i in ids if i not in view.details]
            return _json(answers.details_answer(found, version, missing))

        async def chart(request: Request) -> Response:
            # Boxes send the chart's own version here (beclab/market builds `?fileName=<name>-<v>.tgz&version=<v>`),
            # not their Olares version: only an Olares version 1.12.3 or later picks the generation, anything
            # else is no preference. A legacy box that must get legacy charts uses the /legacy source URL.
            asked = request.query_params.get(answers.QUERY["version"])
            view, _ = self._view(asked if asked and answers.olares_generation(asked) else None, pinned)
            name = request.path_params["name"]
            file_name = request.query_params.get(answers.QUERY["file_name"]) or view.latest.get(name, "")
            owner, path = view.charts.get(file_name, ("", None))
            if path is None or owner != name:
                raise _fail("no_chart", file_name=file_name, name=name)
            try:
                data = await anyio.to_thread.run_sync(read_listed, self.store.state, path)
            except OSError:
                raise _fail("chart_gone", file_name=file_name) from None
            return Response(
                data,
                headers={
                    header: answers.fill(value, file_name=file_name) for header, value in answers.CHART_HEADERS.items()
                },
            )

        async def v2_catalog(request: Request) -> Response:
            view, _ = self._view(request.query_params.get(answers.QUERY["version"]), pinned)
            asked = request.query_params.get(answers.QUERY["source_id"])
            if asked is not None and len(asked) > answers.MAX_SOURCE_ID:
                raise _fail("bad_source_id")
            return _json(answers.v2_catalog_answer(view.v2.catalog, asked or self.store.state.source.source_id))

        async def v2_taxonomy(request: Request) -> Response:
            view, _ = self._view(request.query_params.get(answers.QUERY["version"]), pinned)
            return _json(view.v2.taxonomy)

        async def v2_applications(request: Request) -> Response:
            view, _ = self._view(request.query_params.get(answers.QUERY["version"]), pinned)
            page, size = (request.query_params.get(answers.QUERY[key]) for key in ("page", "size"))
            number = 1 if page is None else answers.whole_number(page, 1, answers.MAX_PAGE)
            if number is None:
                raise _fail("bad_page", page=page)
            count = 0 if size is None else answers.whole_number(size, 0, answers.MAX_PAGE_SIZE)
            if count is None:
                raise _fail("bad_size", size=size)
            return _json(
                answers.v2_applications_answer(view.v2.items, view.v2.removed, view.v2.max_time, number, count)
            )

        # 1.12.7's sync (market/v2.py): these have no v1 form; the v1 calls below answer under both prefixes
        routes: list[BaseRoute] = [
            Route("/api/v2/catalog", v2_catalog, methods=["GET"]),
            Route("/api/v2/taxonomy", v2_taxonomy, methods=["GET"]),
            Route("/api/v2/applications", v2_applications, methods=["GET"]),
            Route("/api/v2/browse/applications", v2_applications, methods=["GET"]),
        ]
        for api in ("/api/v1", "/api/v2"):
            routes += [
                Route(f"{api}/appstore/hash", hash_, methods=["GET"]),
                Route(f"{api}/appstore/info", info, methods=["GET"]),
                Route(f"{api}/applications/info", details, methods=["POST"]),
                Route(f"{api}/applications/{{name}}/chart", chart, methods=["GET"]),
            ]
        return routes

    async def icon(self, request: Request) -> Response:
        state = self.store.state
        path = state.icons.get(request.path_params["file"])
        if path is None:
            raise _fail("no_icon")
        try:
            data = await anyio.to_thread.run_sync(read_listed, state, path)
        except OSError:
            raise _fail("no_icon") from None
        return Response(data, media_type=answers.icon_type(path.name), headers={"cache-control": answers.ICON_CACHE})

    async def alive(self, request: Request) -> Response:
        """Liveness: 200 while the process serves, stale catalog or not (restarting would not help: a
        restarted server refuses to start on an unloadable catalog). /health carries the 503."""
        response = await self.health(request)
        response.status_code = 200
        return response

    async def health(self, request: Request) -> Response:
        """200 {"status": "ok"} while the catalog on disk is the one served; 503 {"status": "stale", "error"}
        while it cannot be loaded and the previous one is still served (a restart would fail)."""
        state, error = self.store.state, self.store.error
        body: dict[str, Any] = {"status": "stale" if error else "ok"}
        if error:
            body["error"] = error
        body["generations"] = {
            g: {"hash": v.hash, "apps": v.apps, "charts": len(v.charts)} for g, v in state.generations.items()
        }
        body["icons"] = len(state.icons)
        return _json(market.served_json(body), 503 if error else 200)


async def _error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, Refusal):
        status, detail = exc.status_code, exc.detail
        if exc.close:  # uvicorn closes the connection after an answer that says so
            return Response(
                market.served_json({"error": detail}),
                status_code=status,
                media_type=answers.JSON_TYPE,
                headers={"connection": "close"},
            )
    elif isinstance(exc, HTTPException) and exc.status_code in _STARLETTE_FAILURES:
        status, detail = answers.failure(_STARLETTE_FAILURES[exc.status_code])
    elif isinstance(exc, HTTPException):
        status, detail = exc.status_code, exc.detail
    else:
        status, detail = answers.failure("internal")
    return _json(market.served_json({"error": detail}), status)


def create_app(market_dir: Path, poll_seconds: float = 1.0) -> Starlette:
    """The ASGI app; raises CatalogError (MissingCatalogError) when the market cannot be served."""
    store = Store(market_dir)
    api = Api(store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_exception_handler(AcceptErrors())
        watcher = asyncio.create_task(store.watch(poll_seconds))
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    routes: list[BaseRoute] = [
        *api.routes(None),
        *(Mount(f"/{gen}", routes=api.routes(gen)) for gen in GENERATION_NAMES),
        Route("/icons/{file}", api.icon, methods=["GET"]),
        Route("/health", api.health, methods=["GET"]),
        Route("/healthz", api.alive, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(AccessLogAndCors)],
        exception_handlers={HTTPException: _error},
    )
    app.state.store = store
    return app


def make_server(
    market_dir: Path, host: str, port: int, poll_seconds: float = 1.0, limits: ConnectionLimits | None = None
) -> uvicorn.Server:
    """A uvicorn server for the market (not started). Logging is configured by the caller; uvicorn's
    access log is off because AccessLogAndCors and the protocol write one richer line per request.
    uvicorn's limit_concurrency is off: it refuses new requests while idle connections hold the slots;
    the guarded protocol's cap evicts those instead."""
    limits = limits or ConnectionLimits(max_connections=default_max_connections())
    config = uvicorn.Config(
        create_app(market_dir, poll_seconds),
        host=host,
        port=port,
        http=protocol_class(limits),
        ws="none",
        log_config=None,
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_keep_alive=limits.keep_alive_seconds,
        limit_concurrency=None,
        backlog=2048,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


def run(
    market_dir: Path, host: str, port: int, poll_seconds: float = 1.0, limits: ConnectionLimits | None = None
) -> None:
    """Serve until interrupted (see make_server; ConnectionLimits has the cap and timeouts)."""
    make_server(market_dir, host, port, poll_seconds, limits).run()
