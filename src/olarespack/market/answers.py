"""What `olarespack serve` and the exported Cloudflare Worker both answer, decided once, as data.

serve.py reads these structures when it builds its app and at each request; the export (cloudflare.py)
writes table() into the Worker's market.json, and the Worker's script (worker/index.js) reads it there.
So a status, a header, an error text, a limit or the version that picks a generation changed here changes
both. What is not here is per market (the route table serve's app compiles, the answers, the chart and
icon indexes: the export reads them from serve's own objects) or per request (routing as Starlette routes,
reading a body), which each side does in its own language.

Texts with values use one placeholder form both sides fill the same way (fill()): `{name}` is the value as
text, `{name:r}` its Python repr() and `{name:r40}` the repr() of its first 40 characters.
"""

from __future__ import annotations

import json
import mimetypes
import re
from dataclasses import dataclass
from typing import Any, Final

from olarespack.olares.generations import GENERATIONS, GenerationName

JSON_TYPE: Final = "application/json"
CORS: Final = (
    ("access-control-allow-origin", "*"),
    ("access-control-allow-methods", "GET, POST, OPTIONS"),
    ("access-control-allow-headers", "Content-Type"),
    ("access-control-max-age", "86400"),
)
PREFLIGHT_STATUS: Final = 204  # OPTIONS on any path, answered before routing
MAX_BODY: Final = 16 * 1024  # ten ids and a version fit in well under 1 KiB
MAX_IDS: Final = 10  # what Olares' syncer sends per batch
DEFAULT_GENERATION: Final[GenerationName] = "current"
# what a box names its query parameters
QUERY: Final = {"version": "version", "file_name": "fileName", "source_id": "source_id", "page": "page", "size": "size"}
CHART_HEADERS: Final = {"content-type": "application/gzip", "content-disposition": 'attachment; filename="{file_name}"'}
ICON_CACHE: Final = "public, max-age=3600"
ICON_FALLBACK_TYPE: Final = "application/octet-stream"
# The GET answers are their cached part (v1.VersionedAnswer.rest) behind this and the echoed version.
VERSIONED_HEAD: Final = '{"version":'
# POST details: {apps} is `"<id>":<entry>` joined by the first separator, {not_found} the missing ids
# joined by the second (json.dumps' list form), {version} the echoed version; every id and the version as
# ASCII-only JSON strings.
DETAILS_ANSWER: Final = '{"apps":{{apps}},"version":{version},"not_found":[{not_found}]}'
DETAILS_SEPARATORS: Final = {"apps": ",", "not_found": ", "}
# The v2 probe (market/v2.py): {source_id} the caller's id (or the market's own) as an ASCII-only JSON string,
# the rest the generation's values (v2.Answers.catalog).
# Every v2 answer is this, its data, and a closing brace (the v1 paths under /api/v2/ keep their v1 shapes).
V2_HEAD: Final = '{"code":0,"msg":"success","data":'
V2_CATALOG_ANSWER: Final = (
    V2_HEAD + '{"schema_version":{schema},"source_id":{source_id},'
    '"taxonomy_last_modify_time":{taxonomy_time},"apps_last_modify_time":{apps_time},'
    '"apps_filter_digest":{digest}}}'
)
# A page of the v2 application list: {items} the page's serialized items joined by commas, {has_more}
# `true`/`false`, the numbers as JSON integers. Pages count from 1; no size (or 0) is every app on one page.
V2_APPLICATIONS_ANSWER: Final = (
    V2_HEAD + '{"items":[{items}],"removed":{removed},'
    '"has_more":{has_more},"max_last_modify_time":{max_time},"total":{total},'
    '"page":{page},"page_size":{page_size}}}'
)
MAX_PAGE_SIZE: Final = 1000
MAX_PAGE: Final = 1_000_000
MAX_SOURCE_ID: Final = 128  # an echoed id: longer is no source id, and bounds the answer
WHOLE_NUMBER: Final = r"[0-9]{1,7}"  # page and size, as both sides read them (the whole string)
PLACEHOLDER: Final = r"\{([a-z_]+)(:r([0-9]*))?\}"
_PLACEHOLDER: Final = re.compile(PLACEHOLDER)
_WHOLE_NUMBER: Final = re.compile(WHOLE_NUMBER, re.ASCII)


@dataclass(frozen=True)
class Failure:
    status: int
    text: str  # the `error` member of the JSON answer, with placeholders


# Every error answer, by what went wrong. body_malformed is the Worker's alone: serve's HTTP layer answers a
# body whose framing breaks itself, before the app runs.
FAILURES: Final = {
    "no_route": Failure(404, "Not Found"),  # Starlette's texts: the router raises them with the phrase
    "bad_method": Failure(405, "Method Not Allowed"),
    "bad_version": Failure(400, "version: {version:r40} is not an Olares version 1.12.3 or later"),
    "no_generation": Failure(404, "this market publishes no {generation} generation"),
    "no_chart": Failure(404, "no chart {file_name:r80} for app {name:r40}"),
    "chart_gone": Failure(404, "chart {file_name:r} is gone"),
    "no_icon": Failure(404, "no such icon"),
    "body_too_big": Failure(413, f"body: at most {MAX_BODY} bytes"),
    "body_malformed": Failure(400, "body: malformed (its chunked encoding or length does not hold)"),
    "not_json": Failure(400, 'body: not JSON; send {"app_ids": ["<id>", ...], "version": "1.12.6"}'),
    "not_object": Failure(400, 'body: expected a JSON object {"app_ids": [...], "version": "..."}'),
    "bad_ids": Failure(400, "app_ids: expected a list of app id strings"),
    "too_many_ids": Failure(400, f"app_ids: at most {MAX_IDS} ids per request, got {{count}}"),
    "bad_version_type": Failure(400, "version: expected a string like 1.12.6"),
    "bad_page": Failure(400, f"page: {{page:r20}} is not a whole number from 1 to {MAX_PAGE}"),
    "bad_size": Failure(400, f"size: {{size:r20}} is not a whole number from 0 to {MAX_PAGE_SIZE}"),
    "bad_source_id": Failure(400, f"source_id: at most {MAX_SOURCE_ID} characters"),
    "internal": Failure(500, "internal error"),
}

# An Olares version: semver with optional minor and patch (semver.Version.parse(optional_minor_and_patch=True)),
# written once in the regex syntax Python and JavaScript read alike (numbered groups: major, minor, patch,
# prerelease, build). The whole string must match.
OLARES_VERSION: Final = (
    r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?)?"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_OLARES_VERSION: Final = re.compile(OLARES_VERSION, re.ASCII)
OLARES_VERSION_MAX: Final = 40  # longer is no Olares version (and bounds the work a request costs)


def _floors() -> list[tuple[tuple[int, int, int], GenerationName]]:
    """The first Olares release of each generation, oldest first, read from the generation's dependency
    range (`>=1.12.3-0,...`): the version a box sends picks the last generation it has reached."""
    floors = []
    for name, generation in GENERATIONS.items():
        lowest = generation.olares_dependency.split(",")[0].removeprefix(">=").removesuffix("-0")
        major, minor, patch = (int(part) for part in lowest.split("."))
        floors.append(((major, minor, patch), name))
    return sorted(floors)


GENERATION_FLOORS: Final = _floors()


def olares_generation(version: str) -> GenerationName | None:
    """The generation an Olares version picks; None when it is no Olares version 1.12.3 or later. A
    prerelease sorts before its release; build data does not count."""
    match = _OLARES_VERSION.fullmatch(version) if len(version) <= OLARES_VERSION_MAX else None
    if match is None:
        return None
    release = (int(match[1]), int(match[2] or 0), int(match[3] or 0))
    found: GenerationName | None = None
    for floor, name in GENERATION_FLOORS:
        if release > floor or (release == floor and match[4] is None):
            found = name
    return found


def fill(template: str, **values: object) -> str:
    """The template with each placeholder replaced (see the module docstring); a missing value is a bug."""

    def one(match: re.Match[str]) -> str:
        value = values[match[1]]
        if not match[2]:
            return str(value)
        text = str(value)
        return repr(text[: int(match[3])] if match[3] else text)

    return _PLACEHOLDER.sub(one, template)


def failure(key: str, **values: object) -> tuple[int, str]:
    """(status, error text) of one error answer."""
    found = FAILURES[key]
    return found.status, fill(found.text, **values)


def details_answer(found: list[tuple[str, bytes]], version: str, missing: list[str]) -> bytes:
    """The POST details answer: `found` holds (id, serialized entry) pairs, in the order asked."""
    apps = DETAILS_SEPARATORS["apps"].join(f"{_ascii(i)}:{entry.decode('utf-8')}" for i, entry in found)
    not_found = DETAILS_SEPARATORS["not_found"].join(_ascii(i) for i in missing)
    return fill(DETAILS_ANSWER, apps=apps, version=_ascii(version), not_found=not_found).encode("utf-8")


def whole_number(text: str, low: int, high: int) -> int | None:
    """A page or size parameter's value; None when it is not a whole number from low to high."""
    if not _WHOLE_NUMBER.fullmatch(text):
        return None
    number = int(text)
    return number if low <= number <= high else None


def v2_catalog_answer(values: dict[str, str], source_id: str) -> bytes:
    return fill(V2_CATALOG_ANSWER, source_id=_ascii(source_id), **values).encode("utf-8")


def v2_applications_answer(items: tuple[bytes, ...], removed: bytes, max_time: str, page: int, size: int) -> bytes:
    """One page of the list (see V2_APPLICATIONS_ANSWER)."""
    shown = items[(page - 1) * size : page * size] if size else items
    return fill(
        V2_APPLICATIONS_ANSWER,
        items=",".join(item.decode("utf-8") for item in shown),
        removed=removed.decode("utf-8"),
        has_more="true" if size and page * size < len(items) else "false",
        max_time=max_time,
        total=len(items),
        page=page,
        page_size=size or len(items),
    ).encode("utf-8")


def _ascii(text: str) -> str:
    return json.dumps(text)  # ensure_ascii: any str gives valid UTF-8 JSON


def icon_type(file_name: str) -> str:
    return mimetypes.guess_type(file_name)[0] or ICON_FALLBACK_TYPE


def table() -> dict[str, Any]:
    """Everything above as the Worker reads it (market.json's `answers`); read at call time, so it is what
    serve answers now."""
    return {
        "json_type": JSON_TYPE,
        "cors": [list(pair) for pair in CORS],
        "preflight_status": PREFLIGHT_STATUS,
        "max_body": MAX_BODY,
        "max_ids": MAX_IDS,
        "default_generation": DEFAULT_GENERATION,
        "query": dict(QUERY),
        "chart_headers": dict(CHART_HEADERS),
        "icon_cache": ICON_CACHE,
        "versioned_head": VERSIONED_HEAD,
        "details_answer": DETAILS_ANSWER,
        "details_separators": dict(DETAILS_SEPARATORS),
        "placeholder": PLACEHOLDER,
        "v2_catalog_answer": V2_CATALOG_ANSWER,
        "v2_applications_answer": V2_APPLICATIONS_ANSWER,
        "max_page_size": MAX_PAGE_SIZE,
        "max_page": MAX_PAGE,
        "max_source_id": MAX_SOURCE_ID,
        "whole_number": WHOLE_NUMBER,
        "failures": {key: {"status": f.status, "text": f.text} for key, f in FAILURES.items()},
        "olares_version": {
            "pattern": OLARES_VERSION,
            "max_length": OLARES_VERSION_MAX,
            "floors": [[list(floor), name] for floor, name in GENERATION_FLOORS],
        },
    }
