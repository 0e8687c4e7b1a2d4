"""`olarespack export cloudflare`: a published market folder as a Cloudflare Worker that answers every
request as `olarespack serve` does (a static host cannot answer the POST a box sends for details).

The export is decided here, in Python, by serve's own code, so the Worker's JavaScript
(market/worker/index.js, package data copied as it is) is HTTP glue over precomputed pieces:
- worker/market.json, bundled into the script: the route table of the app serve builds (its compiled path
  patterns, methods and endpoints, read from create_app()), the table of answers serve reads too
  (answers.table(): statuses, headers, error texts, limits, the Olares versions of each generation), each
  generation's chart index, the icon index and the /health answer serve gives for this market.
- assets/answers/<generation>-<digest>.json: the hash and info answers without their `version` member
  (v1.VersionedAnswer) and every serialized detail entry, the bytes serve sends. The digest in the
  name ties a script to the answers it was exported with, even while a deploy is half rolled out.
- assets/charts/<generation>/<file>, assets/icons/<file>: exactly the files serve's load_state indexes
  (inside the market folder, names it accepts), read by the Worker through the ASSETS binding only.
- wrangler.jsonc: the Worker, its pinned compatibility date and the assets with run_worker_first, so no
  asset is ever served by path: a request names a key, as with serve.

Same market folder, byte-identical export. The whole folder is built beside the old one and swapped in
(write.staging_folder / swap_in), and a folder that holds anything but a previous export is refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from starlette.routing import BaseRoute, Mount, Route

from olarespack.core.errors import UsageError, WriteError
from olarespack.market import answers, serve
from olarespack.market.state import MarketState
from olarespack.olares.generations import GENERATION_NAMES
from olarespack.write import FILE_MODE, staging_folder, swap_in

WORKER_SOURCE: Final = "worker/index.js"  # beside this module; copied to the same path in the export
CONFIG_FILE: Final = "wrangler.jsonc"
MARKER: Final = "// Written by `olarespack export cloudflare`"
# A date the pinned wrangler's workerd supports (tools/worker): a newer wrangler deploys it unchanged.
COMPATIBILITY_DATE: Final = "2026-04-01"
# Cloudflare's limit on one static asset (Workers Static Assets); a larger file would fail the deploy.
MAX_ASSET_BYTES: Final = 25 * 2**20
DEFAULT_NAME: Final = "olarespack-market"
_WORKER_NAME: Final = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
# serve's endpoints (the function names create_app routes to) -> the Worker's handlers of the same answer
_ENDPOINTS: Final = {
    "hash_": "hash",
    "info": "info",
    "details": "details",
    "chart": "chart",
    "icon": "icon",
    "health": "health",
    "alive": "alive",
    "v2_catalog": "v2Catalog",
    "v2_taxonomy": "v2Taxonomy",
    "v2_applications": "v2Applications",
}


@dataclass(frozen=True)
class Export:
    """The export of one market folder: generated files by content, market files by their source path."""

    files: dict[str, bytes] = field(default_factory=dict)
    copies: dict[str, Path] = field(default_factory=dict)

    def paths(self) -> list[str]:
        return sorted({*self.files, *self.copies})


def js_pattern(pattern: str) -> str:
    """A Starlette path regex as a JavaScript RegExp source that matches the same strings: named groups in
    JS syntax, Python's `.` (anything but a newline; JS's also stops at \\r and U+2028/9) spelled out, and
    Python's `$`, which also matches before one final newline (a path may hold %0A)."""
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise ValueError(f"unexpected route pattern {pattern!r}")
    body = pattern[1:-1].replace("(?P<", "(?<").replace(".*", "[^\\n]*")
    if re.search(r"(?<!\\)\.(?!\*)", body.replace("[^\\n]*", "")):
        raise ValueError(f"route pattern {pattern!r} has a `.` the Worker would read differently")
    return f"^{body}\\n?$"


def route_table(routes: list[BaseRoute]) -> list[dict[str, Any]]:
    """serve's routes as the Worker walks them, in Starlette's order (the first full match wins)."""
    table: list[dict[str, Any]] = []
    for entry in routes:
        if isinstance(entry, Mount):
            pinned = entry.path.strip("/")
            if pinned not in GENERATION_NAMES:
                raise ValueError(f"serve mounts {entry.path!r}, which pins no generation")
            table.append(
                {
                    "pattern": js_pattern(entry.path_regex.pattern),
                    "pinned": pinned,
                    "routes": route_table(list(entry.routes)),
                }
            )
        elif isinstance(entry, Route):
            endpoint = _ENDPOINTS.get(getattr(entry.endpoint, "__name__", ""))
            if endpoint is None:  # serve grew an endpoint the Worker does not answer yet
                raise ValueError(f"serve routes {entry.path} to {entry.endpoint!r}, which the Worker lacks")
            table.append(
                {
                    "pattern": js_pattern(entry.path_regex.pattern),
                    "methods": sorted(entry.methods or ()),
                    "endpoint": endpoint,
                }
            )
        else:
            raise ValueError(f"serve has a route the Worker cannot mirror: {entry!r}")
    return table


def _health(routes: list[BaseRoute]) -> bytes:
    """The body serve answers /health with while its catalog is fresh, from serve's own endpoint."""
    (route,) = [r for r in routes if isinstance(r, Route) and r.path == "/health"]
    response = asyncio.run(route.endpoint(None))  # the health endpoint reads the store, not the request
    body: bytes = response.body
    return body


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def build_export(market_dir: Path, name: str = DEFAULT_NAME) -> Export:
    """Everything the Worker needs from a market folder. Raises CatalogError (MissingCatalogError) for a
    folder serve would refuse, through serve's own loader."""
    if not _WORKER_NAME.match(name):
        raise UsageError(
            f"--name: {name!r} is not a Worker name (lowercase letters, digits and dashes, at most "
            "63, not starting or ending with a dash)"
        )
    app = serve.create_app(market_dir)
    state: MarketState = app.state.store.state
    export = Export()
    generations: dict[str, Any] = {}
    for gen, view in state.generations.items():
        precomputed = _json(
            {
                "hash": view.hash_answer.rest.decode("utf-8"),
                "info": view.info_answer.rest.decode("utf-8"),
                "details": {i: entry.decode("utf-8") for i, entry in view.details.items()},
                "v2": {
                    "catalog": view.v2.catalog,
                    "taxonomy": view.v2.taxonomy.decode("utf-8"),
                    "items": [item.decode("utf-8") for item in view.v2.items],
                    "removed": view.v2.removed.decode("utf-8"),
                    "max_time": view.v2.max_time,
                },
            }
        )
        answers_path = f"answers/{gen}-{hashlib.sha256(precomputed).hexdigest()[:16]}.json"
        export.files[f"assets/{answers_path}"] = precomputed
        charts: dict[str, Any] = {}
        for file, (owner, source) in sorted(view.charts.items()):
            charts[file] = {"owner": owner, "asset": f"charts/{gen}/{file}"}
            export.copies[f"assets/charts/{gen}/{file}"] = source
        generations[gen] = {
            "default_version": view.default_version,
            "answers": answers_path,
            "charts": charts,
            "latest": dict(sorted(view.latest.items())),
        }
    icons: dict[str, Any] = {}
    for file, source in sorted(state.icons.items()):
        # serve.Api.icon's content type, decided once here
        icons[file] = {"asset": f"icons/{file}", "type": answers.icon_type(source.name)}
        export.copies[f"assets/icons/{file}"] = source
    market = {
        "routes": route_table(list(app.routes)),
        "answers": answers.table(),
        "health": _health(list(app.routes)).decode("utf-8"),
        "generations": generations,
        "icons": icons,
        "source_id": state.source.source_id,
    }
    export.files["worker/market.json"] = _json(market)
    export.files[WORKER_SOURCE] = worker_script()
    export.files[CONFIG_FILE] = wrangler_config(name)
    _check_sizes(export)
    return export


def worker_script() -> bytes:
    """The Worker's JavaScript, shipped in the package beside this module."""
    return (Path(__file__).parent / WORKER_SOURCE).read_bytes()


def wrangler_config(name: str) -> bytes:
    config = {
        "name": name,
        "main": WORKER_SOURCE,
        "compatibility_date": COMPATIBILITY_DATE,
        # every request runs the Worker; the assets are reachable through the binding only, never by path
        "assets": {"directory": "assets", "binding": "ASSETS", "run_worker_first": True},
    }
    return (
        f"{MARKER} from a published market folder; export again instead of editing.\n"
        "// Run it locally: `wrangler dev`; put it on Cloudflare: `wrangler deploy`.\n"
    ).encode() + _json(config)


def _check_sizes(export: Export) -> None:
    for path in export.paths():
        if not path.startswith("assets/"):
            continue
        size = len(export.files[path]) if path in export.files else export.copies[path].stat().st_size
        if size > MAX_ASSET_BYTES:
            source = export.copies.get(path, path)
            fix = (
                "make the chart smaller" if path.startswith("assets/charts/") else "publish fewer apps per market"
            ) + ", or serve this market with `olarespack serve`"
            raise UsageError(
                f"{source}: {size} bytes; Cloudflare serves a static asset of at most {MAX_ASSET_BYTES} bytes ({fix})"
            )


def _is_previous_export(out: Path) -> bool:
    try:
        return (out / CONFIG_FILE).read_bytes().startswith(MARKER.encode())
    except OSError:
        return False


def write_export(export: Export, out: Path, market_dir: Path) -> None:
    """Replace `out` with the export in one swap; refuse a folder that holds anything else, and a folder
    the market lives in (replacing it would delete the market)."""
    if out.resolve() == market_dir.resolve() or market_dir.resolve().is_relative_to(out.resolve()):
        raise UsageError(f"--out: {out} holds the market folder {market_dir}; export into a folder of its own")
    if out.is_dir() and any(out.iterdir()) and not _is_previous_export(out):
        raise WriteError(
            f"{out}: has files that are not an olarespack export (no {CONFIG_FILE} written by "
            "olarespack); give an empty or new folder for --out"
        )
    staging = staging_folder(out)
    try:
        for path in export.paths():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in export.files:
                target.write_bytes(export.files[path])
            else:
                shutil.copyfile(export.copies[path], target)
            os.chmod(target, FILE_MODE)
        swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def export_cloudflare(market_dir: Path, out: Path, name: str = DEFAULT_NAME) -> Export:
    export = build_export(market_dir, name)
    write_export(export, out, market_dir)
    return export
