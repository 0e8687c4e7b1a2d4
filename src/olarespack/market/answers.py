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
CORS: Final = (("access-control-allow-origin", "*"), ("access-control-allow-methods", "GET, POST, OPTIONS"),
               ("access-control-allow-headers", "Content-Type"), ("access-control-max-age", "86400"))
PREFLIGHT_STATUS: Final = 204  # OPTIONS on any path, answered before routing
MAX_BODY: Final = 16 * 1024  # ten ids and a version fit in well under 1 KiB
MAX_IDS: Final = 10  # what Olares' syncer sends per batch
DEFAULT_GENERATION: Final[GenerationName] = "current"
QUERY: Final = {"version": "version", "file_name": "fileName"}  # what a box names its query parameters
CHART_HEADERS: Final = {"content-type": "application/gzip",
                        "content-disposition": 'attachment; filename="{file_name}"'}
ICON_CACHE: Final = "public, max-age=3600"
ICON_FALLBACK_TYPE: Final = "application/octet-stream"
# The GET answers are their cached part (catalog.VersionedAnswer.rest) behind this and the echoed version.
VERSIONED_HEAD: Final = '{"version":'
# POST details: {apps} is `"<id>":<entry>` joined by the first separator, {not_found} the missing ids
# joined by the second (json.dumps' list form), {version} the echoed version; every id and the version as
# ASCII-only JSON strings.
DETAILS_ANSWER: Final = '{"apps":{{apps}},"version":{version},"not_found":[{not_found}]}'
DETAILS_SEPARATORS: Final = {"apps": ",", "not_found": ", "}
PLACEHOLDER: Final = r"\{([a-z_]+)(:r([0-9]*))?\}"
_PLACEHOLDER: Final = re.compile(PLACEHOLDER)


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
    "internal": Failure(500, "internal error"),
}

# An Olares version: semver with optional minor and patch (semver.Version.parse(optional_minor_and_patch=True)),
# written once in the regex syntax Python and JavaScript read alike (numbered groups: major, minor, patch,
# prerelease, build). The whole string must match.
OLARES_VERSION: Final = (
    r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?)?"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?")
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
        return repr(text[:int(match[3])] if match[3] else text)

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


def _ascii(text: str) -> str:
    return json.dumps(text)  # ensure_ascii: any str gives valid UTF-8 JSON


def icon_type(file_name: str) -> str:
    return mimetypes.guess_type(file_name)[0] or ICON_FALLBACK_TYPE


def table() -> dict[str, Any]:
    """Everything above as the Worker reads it (market.json's `answers`); read at call time, so it is what
    serve answers now."""
    return {
        "json_type": JSON_TYPE, "cors": [list(pair) for pair in CORS], "preflight_status": PREFLIGHT_STATUS,
        "max_body": MAX_BODY, "max_ids": MAX_IDS, "default_generation": DEFAULT_GENERATION, "query": dict(QUERY),
        "chart_headers": dict(CHART_HEADERS), "icon_cache": ICON_CACHE, "versioned_head": VERSIONED_HEAD,
        "details_answer": DETAILS_ANSWER, "details_separators": dict(DETAILS_SEPARATORS),
        "placeholder": PLACEHOLDER,
        "failures": {key: {"status": f.status, "text": f.text} for key, f in FAILURES.items()},
        "olares_version": {"pattern": OLARES_VERSION, "max_length": OLARES_VERSION_MAX,
                           "floors": [[list(floor), name] for floor, name in GENERATION_FLOORS]},
    }
