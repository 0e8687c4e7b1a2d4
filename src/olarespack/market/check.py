"""`olarespack market check URL`: walk an Olares box's sync of a market source, as each Olares version does
it, and say at every step what the box would do.

Two sequences (DOMAIN.md sections 6 and 6b):
- 1.12.6 and earlier (the v1 sync): `GET /api/v1/appstore/hash?version=`, `GET /api/v1/appstore/info`
  (only entries whose `id` equals their key are kept; the answer's `version` is adopted), `POST
  /api/v1/applications/info` in batches of 10, then each chart.
- 1.12.7 and later: `GET /api/v2/catalog?source_id=`, a 404 of which aborts the whole sync of the source,
  `GET /api/v2/taxonomy` (how the box names the source), `GET /api/v2/applications?page=&size=` until
  `has_more` is false, then the details and charts, each tried under /api/v2/ first and under /api/v1/ on a 404.

Each step is one line: `take` (the box goes on with what it got), `skip` (one app is left out: it cannot be
installed or fetched), `abort` (the box stops syncing this source), `note` (it goes on, but something is off).
What a box does with a malformed field is read from its Go decoder where known (an ISO string where an integer
is expected fails the decode, which aborts); what is inferred says so.

The market is a stranger: every answer is read bounded (size, time, JSON nesting and numbers) and every text
it sends is printed escaped.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Final

from olarespack.market.check_steps import MAX_APPS, Abort, Walk, answer_json, charts_of, details, field_of, get
from olarespack.market.remote import Fetch, shown
from olarespack.olares.versions import satisfies

V2_FIRST: Final = (1, 12, 7)  # the first Olares whose syncer starts with /api/v2/catalog
DEFAULT_OLARES: Final = ("1.12.6", "1.12.7")
PAGE_SIZE: Final = 100  # the application list, a page at a time
MAX_PAGES: Final = 100


def release_of(version: str) -> tuple[int, ...]:
    match = re.match(r"^(\d{1,9})\.(\d{1,9})\.(\d{1,9})", version)
    if match is None:
        raise ValueError(f"{version!r} is not an Olares version like 1.12.7")
    return tuple(int(part) for part in match.groups())


def check(
    fetch: Fetch, olares: tuple[str, ...] = DEFAULT_OLARES, source_id: str = "olarespack-check", charts: bool = True
) -> list[Walk]:
    """Every version's walk; a step that cannot be taken ends that version's walk only."""
    walks = []
    for version in olares:
        walk = Walk(version)
        try:
            if release_of(version) >= V2_FIRST:
                _walk_v2(fetch, walk, source_id, charts)
            else:
                _walk_v1(fetch, walk, charts)
        except Abort:
            pass
        walks.append(walk)
    return walks


# --------------------------------------------------------------------------- 1.12.7 and later


def _walk_v2(fetch: Fetch, walk: Walk, source_id: str, charts: bool) -> None:
    q = f"version={walk.olares}"
    call = f"GET /api/v2/catalog?source_id={source_id}&{q}"
    status, _, data = get(fetch, walk, "GET", f"/api/v2/catalog?source_id={source_id}&{q}")
    if status == 404:
        walk.add(
            call,
            "abort",
            "404: Olares 1.12.7 starts every sync of a source here, and a 404 aborts the whole "
            "sync (details and charts included): the market answers only the 1.12.6 sequence",
        )
        raise Abort
    probe = _envelope(walk, call, answer_json(walk, call, status, data, "the sync of this source stops"))
    for key in ("taxonomy_last_modify_time", "apps_last_modify_time"):
        field_of(walk, call, probe.get(key), f"data.{key}", int, "the Go decoder wants an integer (epoch ms)")
    digest = field_of(
        walk,
        call,
        probe.get("apps_filter_digest"),
        "data.apps_filter_digest",
        str,
        "the box compares it to know whether the app list changed",
    )
    if not digest:
        walk.add(
            call, "note", "data.apps_filter_digest is empty: the box cannot tell a changed list from an unchanged one"
        )
    if probe.get("source_id") != source_id:
        walk.add(
            call,
            "note",
            f"data.source_id is {shown(probe.get('source_id'), 60)}, not the caller's "
            f"{source_id!r} (inferred: the box files the answer under the id it sent)",
        )
    _times(walk, call, probe["apps_last_modify_time"], "data.apps_last_modify_time", ms=True)
    walk.add(call, "take", f"digest {shown(digest, 40)}, apps changed {_when(probe['apps_last_modify_time'])}")

    call = f"GET /api/v2/taxonomy?{q}"
    status, _, data = get(fetch, walk, "GET", f"/api/v2/taxonomy?{q}")
    taxonomy = _envelope(walk, call, answer_json(walk, call, status, data, "the box has no categories or source name"))
    _taxonomy(walk, call, taxonomy)

    items = _application_pages(fetch, walk, q)
    offered: dict[str, dict[str, Any]] = {}
    for item in items:
        where = f"app {shown(item.get('name'), 40)}"
        constraint = item.get("olares_version_constraint")
        if isinstance(constraint, str) and constraint and satisfies(walk.olares, constraint) is False:
            walk.add(
                "GET /api/v2/applications",
                "skip",
                f"{where}: olares_version_constraint {shown(constraint, 40)} excludes Olares {walk.olares}",
            )
            continue
        offered[str(item["app_id"])] = item
    found_details = details(fetch, walk, list(offered), "/api/v2/applications/info", "/api/v1/applications/info")
    charts_of(fetch, walk, found_details, charts, ("/api/v2", "/api/v1"))


def _envelope(walk: Walk, call: str, answer: Any) -> dict[str, Any]:
    answer = field_of(walk, call, answer, "the answer", dict, "v2 answers are {code, msg, data}")
    if answer.get("code") != 0:
        walk.add(call, "abort", f"code is {shown(answer.get('code'), 20)}, not 0 ({shown(answer.get('msg'), 80)})")
        raise Abort
    data: dict[str, Any] = field_of(walk, call, answer.get("data"), "data", dict, "v2 answers are {code, msg, data}")
    return data


def _times(walk: Walk, call: str, value: int, where: str, ms: bool) -> None:
    """Milliseconds and seconds are both integers: a value in the wrong unit decodes, and is wrong by 1000."""
    in_ms = value > 10**11
    if value and in_ms != ms:
        walk.add(
            call,
            "note",
            f"{where} is {value}, which reads as epoch {'milliseconds' if in_ms else 'seconds'}; "
            f"the protocol wants {'milliseconds' if ms else 'seconds'}",
        )


def _when(value: int) -> str:
    seconds = value / 1000 if value > 10**11 else value
    try:
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return str(value)


def _taxonomy(walk: Walk, call: str, data: dict[str, Any]) -> None:
    source = field_of(walk, call, data.get("source"), "data.source", dict, "the box names the source from it")
    for key in ("source_id", "short_label"):
        field_of(walk, call, source.get(key), f"data.source.{key}", str, "the box names the source from it")
    names = field_of(
        walk, call, source.get("display_name"), "data.source.display_name", dict, "the box names the source from it"
    )
    if source.get("is_official") is True:
        walk.add(call, "note", "data.source.is_official is true: a third-party source presents itself as Olares' own")
    categories = field_of(
        walk, call, data.get("categories"), "data.categories", list, "the box's menu is built from it"
    )
    ids = [c.get("id") for c in categories if isinstance(c, dict)]
    if len(ids) != len(categories) or not all(isinstance(i, str) and i for i in ids):
        walk.add(call, "abort", "data.categories: every category needs a string id")
        raise Abort
    field_of(walk, call, data.get("last_modify_time"), "data.last_modify_time", int, "the Go decoder wants an integer")
    label = names.get("en-US") or next(iter(names.values()), source["short_label"])
    walk.add(
        call,
        "take",
        f"source {shown(label, 60)} ({shown(source['source_id'], 60)}), {len(ids)} "
        f"categor{'y' if len(ids) == 1 else 'ies'}",
    )


def _application_pages(fetch: Fetch, walk: Walk, q: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in range(1, MAX_PAGES + 1):
        path = f"/api/v2/applications?page={page}&size={PAGE_SIZE}&{q}"
        call = f"GET {path}"
        status, _, data = get(fetch, walk, "GET", path)
        answer = _envelope(walk, call, answer_json(walk, call, status, data, "the box gets no app list"))
        found = field_of(walk, call, answer.get("items"), "data.items", list, "the box gets no app list")
        field_of(walk, call, answer.get("removed"), "data.removed", list, "the Go decoder wants a list of app ids")
        for number, item in enumerate(found):
            where = f"data.items[{number}]"
            field_of(walk, call, item, where, dict, "an item is an object")
            for key in ("app_id", "name", "version"):
                field_of(walk, call, item.get(key), f"{where}.{key}", str, "the box keys the app by it")
            for key, ms in (("last_modify_time", True), ("updated_at", False)):
                value = field_of(
                    walk,
                    call,
                    item.get(key),
                    f"{where}.{key}",
                    int,
                    f"the Go decoder wants an integer (epoch {'ms' if ms else 's'}), not an ISO string",
                )
                _times(walk, call, value, f"{where}.{key}", ms)
        items += found
        more = answer.get("has_more")
        walk.add(call, "take", f"{len(found)} app(s), has_more {shown(more, 10)}")
        if more is not True or not found or len(items) > MAX_APPS:
            break
    if len(items) > MAX_APPS:
        walk.add("GET /api/v2/applications", "note", f"more than {MAX_APPS} apps: only those are checked")
        items = items[:MAX_APPS]
    return items


# --------------------------------------------------------------------------- 1.12.6 and earlier


def _walk_v1(fetch: Fetch, walk: Walk, charts: bool) -> None:
    q = f"version={walk.olares}"
    call = f"GET /api/v1/appstore/hash?{q}"
    status, _, data = get(fetch, walk, "GET", f"/api/v1/appstore/hash?{q}")
    found = field_of(
        walk,
        call,
        answer_json(walk, call, status, data, "the box keeps what it had"),
        "the answer",
        dict,
        "an object {hash, last_updated, version}",
    )
    field_of(walk, call, found.get("hash"), "hash", str, "the box compares it to know whether anything changed")
    walk.add(call, "take", f"hash {shown(found['hash'], 40)}")

    call = f"GET /api/v1/appstore/info?{q}"
    status, _, data = get(fetch, walk, "GET", f"/api/v1/appstore/info?{q}")
    info = field_of(
        walk,
        call,
        answer_json(walk, call, status, data, "the box gets no catalog"),
        "the answer",
        dict,
        "an object {version, hash, data, ...}",
    )
    for key in ("version", "hash"):
        if not isinstance(info.get(key), str) or not info[key]:
            walk.add(call, "abort", f"{key} is {shown(info.get(key), 40)}: the box refuses an answer without it")
            raise Abort
    section = field_of(walk, call, info.get("data"), "data", dict, "the box gets no catalog")
    apps = field_of(walk, call, section.get("apps"), "data.apps", dict, "the box gets no catalog")
    tops = section.get("tops")
    if not isinstance(tops, list) or not tops:
        walk.add(call, "note", "data.tops is empty: third-party sources report that newer Olares lists no app then")
    kept = [key for key, app in apps.items() if isinstance(app, dict) and app.get("id") == key]
    for key in sorted(set(apps) - set(kept))[:20]:
        walk.add(call, "skip", f"data.apps[{shown(key, 40)}]: its id is not its key, the box drops it")
    walk.add(call, "take", f"{len(kept)} app(s); the box sends version {shown(info['version'], 40)} from now on")
    adopted = str(info["version"])
    found_details = details(fetch, walk, kept[:MAX_APPS], "/api/v1/applications/info", None, adopted)
    charts_of(fetch, walk, found_details, charts, ("/api/v1",), adopted)


# --------------------------------------------------------------------------- details and charts (both)
