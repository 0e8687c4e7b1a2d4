"""The 1.12.6 sync's GET answers of one generation (`/api/v1/appstore/hash` and `/info`): built from the catalog,
rendered per request with the version the box sent, and written as static files that are byte for byte what
serve answers (market/v2.py holds the 1.12.7 ones)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from olarespack.market import answers
from olarespack.market.catalog import STATIC_DIR, served_json


def _hash_fields(generation: dict[str, Any]) -> dict[str, Any]:
    return {"hash": generation["hash"], "last_updated": generation["last_updated"]}


def _info_fields(generation: dict[str, Any]) -> dict[str, Any]:
    count = len(generation["apps"])
    return {
        "hash": generation["hash"],
        "last_updated": generation["last_updated"],
        "data": {
            "apps": generation["apps"],
            "recommends": {},
            "pages": generation["sections"]["pages"],
            "topics": generation["sections"]["topics"],
            "topic_lists": generation["sections"]["topic_lists"],
            "tops": generation["tops"],
            "latest": generation["latest"],
            "tags": generation["sections"]["tags"],
        },
        "stats": {"totalApps": count, "totalItems": count, "hash": generation["hash"]},
    }


def hash_answer(generation: dict[str, Any], version: str) -> dict[str, Any]:
    return {"version": version, **_hash_fields(generation)}


def info_answer(generation: dict[str, Any], version: str) -> dict[str, Any]:
    return {"version": version, **_info_fields(generation)}


@dataclass(frozen=True)
class VersionedAnswer:
    """A GET answer whose first member, `version`, is the one thing that differs between requests.

    The other members are serialized once, and each answer is the version written in front of them. The
    serialized part holds whatever the specs' authors wrote, so an answer is put together by position,
    never by searching those bytes for a marker. The server and the static files both call render(), so
    a static file is byte for byte what the server answers for the same version."""

    rest: bytes  # the members after `version` (each preceded by a comma) and the closing brace

    @classmethod
    def of(cls, fields: dict[str, Any]) -> VersionedAnswer:
        if "version" in fields:
            raise ValueError("the fields of a versioned answer must not name `version`")
        body = served_json(fields)  # b"{...}": drop its opening brace, the version member takes its place
        return cls(b"," + body[1:] if fields else b"}")

    def render(self, version: str) -> bytes:
        # ensure_ascii: a version is echoed from a request, and any str must give valid UTF-8 JSON
        return answers.VERSIONED_HEAD.encode("ascii") + json.dumps(version).encode("ascii") + self.rest


def hash_template(generation: dict[str, Any]) -> VersionedAnswer:
    """The hash answer, rendered per request: render(v) == served_json(hash_answer(gen, v)) for an ASCII
    version v (every Olares version; render() escapes anything else)."""
    return VersionedAnswer.of(_hash_fields(generation))


def info_template(generation: dict[str, Any]) -> VersionedAnswer:
    """The info answer, rendered per request (see hash_template)."""
    return VersionedAnswer.of(_info_fields(generation))


def _header_name(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


# Cloudflare Pages / Netlify header rules for the GET answers: serve's content type and CORS headers (the
# max-age of a preflight answer is the host's own: a static host answers preflights itself).
STATIC_HEADERS: Final = (
    "# Cloudflare Pages / Netlify header rules: the market's GET answers are JSON files without an extension.\n"
    "/api/*\n"
    + "".join(
        f"  {_header_name(name)}: {value}\n"
        for name, value in (("content-type", answers.JSON_TYPE), *answers.CORS)
        if name != "access-control-max-age"
    )
)


def static_files(catalog: dict[str, Any]) -> dict[str, bytes]:
    """Market-relative path -> bytes of the GET answers, one site root per generation; each file is what
    `olarespack serve` answers for that generation's STATIC_OLARES_VERSION."""
    files: dict[str, bytes] = {}
    for gen, generation in catalog["generations"].items():
        root = f"{STATIC_DIR}/{gen}"
        version = generation["olares_version"]
        # the same render() the server runs for a request with this version: the files cannot drift from it
        hash_bytes, info_bytes = hash_template(generation).render(version), info_template(generation).render(version)
        files[f"{root}/_headers"] = STATIC_HEADERS.encode("utf-8")
        for api in ("v1", "v2"):
            files[f"{root}/api/{api}/appstore/hash"] = hash_bytes
            files[f"{root}/api/{api}/appstore/info"] = info_bytes
    return files
