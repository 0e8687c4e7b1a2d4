"""Olares 1.12.7's source sync (the "v2" calls), built from a published catalog (pure: no I/O).

A 1.12.7 box (market-backend v0.6.107) syncs a source in this order, and a 404 at the first step aborts the
whole sync of that source, the v1 detail and chart fetches included (DOMAIN.md 6b):
1. `GET /api/v2/catalog?source_id=<id>`: a cheap "has anything changed" probe. `apps_filter_digest` changes
   exactly when what the asking box's Olares version is offered changes; the two times move forward when
   their part changed.
2. `GET /api/v2/taxonomy`: the source's identity (how the box names it), languages, categories, pages.
3. `GET /api/v2/applications?page=&size=` (also `/api/v2/browse/applications`): the apps, a page at a time,
   with `removed` for the apps this market stopped offering.
4. the v1 details and charts, tried under `/api/v2/` first (serve answers both prefixes alike).

Every answer is per generation, like the v1 ones: the box's Olares version picks what it is offered.

Nothing here reads the clock. An app's times are its current release's (its changelog date); the probe's
times and the `removed` list are a record publish keeps in the catalog (`sync`), carried from the previous
catalog: a time moves only when its digest changed, so the same specs published again give the same bytes and
boxes do not re-sync for nothing, and an app taken out of the market is listed as removed from then on.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Final

from olarespack.market import answers
from olarespack.market.catalog import STATIC_DIR, canonical_json, served_json
from olarespack.market.sections import KNOWN, category_ids
from olarespack.olares.generations import GENERATIONS, GenerationName

SCHEMA_VERSION: Final = "v2"
_APP_ID: Final = re.compile(r"[0-9a-f]{8}")  # Olares' app id (generations.app_id)
# How the Market names a language in its language list; a locale not here is named by its code.
LANGUAGE_NAMES: Final = {
    "en-US": "English",
    "zh-CN": "简体中文",
    "zh-TW": "繁體中文",
    "fr-FR": "Français",
    "de-DE": "Deutsch",
    "es-ES": "Español",
    "it-IT": "Italiano",
    "pt-BR": "Português (Brasil)",
    "ja-JP": "日本語",
    "ko-KR": "한국어",
    "ru-RU": "Русский",
    "nl-NL": "Nederlands",
    "pl-PL": "Polski",
    "tr-TR": "Türkçe",
    "vi-VN": "Tiếng Việt",
}


@dataclass(frozen=True)
class SourceIdentity:
    """How a box names this market (1.12.7's add-source dialog reads it from the taxonomy answer)."""

    source_id: str
    short_label: str
    display_name: dict[str, str]
    icon: str = ""

    def as_json(self) -> dict[str, Any]:
        # is_official: only Olares' own market is; a third-party source claiming it would mislead the box's owner
        return {
            "source_id": self.source_id,
            "short_label": self.short_label,
            "display_name": dict(sorted(self.display_name.items())),
            "icon": self.icon,
            "is_official": False,
        }

    @classmethod
    def of(cls, data: Any) -> SourceIdentity:
        """The identity a catalog records (publish writes it); a catalog from before it has the default."""
        if not isinstance(data, dict):
            return DEFAULT_SOURCE
        names = data.get("display_name")
        return cls(
            str(data["source_id"]),
            str(data["short_label"]),
            {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {},
            str(data.get("icon") or ""),
        )


DEFAULT_SOURCE: Final = SourceIdentity("olarespack", "olarespack", {"en-US": "olarespack market"})


def _md5(value: Any) -> str:
    return hashlib.md5(canonical_json(value), usedforsecurity=False).hexdigest()


def _olares_constraint(detail: dict[str, Any], generation: GenerationName) -> str:
    """The Olares versions the app's manifest installs on (its `olares` dependency), else the generation's."""
    options = detail.get("options")
    for dependency in (options.get("dependencies") or []) if isinstance(options, dict) else []:
        if isinstance(dependency, dict) and dependency.get("name") == "olares" and dependency.get("version"):
            return str(dependency["version"])
    return GENERATIONS[generation].olares_dependency


def _categories(generation: dict[str, Any]) -> list[str]:
    """The categories of the offered apps, as the v1 menu lists them (without its own "All")."""
    return sorted({c for d in generation["details"].values() for c in d["categories"]} - {"All"})


def application_items(generation: dict[str, Any], gen: GenerationName) -> list[dict[str, Any]]:
    """The application list's items, by app name. Times: last_modify_time in epoch milliseconds, updated_at in
    epoch seconds, both integers (the Go decoder refuses an ISO string), the app's current release."""
    ids = category_ids(_categories(generation))
    items = []
    for detail in sorted(generation["details"].values(), key=lambda d: str(d["name"])):
        released = int(detail["updateTime"])
        categories = [str(c) for c in detail["categories"]]
        items.append(
            {
                "app_id": detail["id"],
                "name": detail["name"],
                "title": detail["title"],
                "version": detail["version"],
                "icon": detail["icon"],
                "featured_image": detail.get("featuredImage") or "",
                "cfg_type": detail.get("cfgType") or "app",
                "categories": categories,
                "categories_v2": [ids[c] for c in categories if c in ids],
                "tags": list(detail.get("tags") or []),
                "app_labels": [],
                "olares_version_constraint": _olares_constraint(detail, gen),
                "last_modify_time": released * 1000,
                "updated_at": released,
            }
        )
    return items


def taxonomy_data(generation: dict[str, Any], source: SourceIdentity) -> dict[str, Any]:
    """The taxonomy answer's data without its time: the source's identity, its languages (the apps' locales,
    English first) and one category per app category, each page listing all of that category's apps."""
    categories = _categories(generation)
    ids = category_ids(categories)
    locales = sorted(
        {str(locale) for d in generation["details"].values() for locale in d.get("locale") or []},
        key=lambda code: (code != "en-US", code),
    )
    return {
        "source": source.as_json(),
        "languages": [
            {"code": code, "display_name": LANGUAGE_NAMES.get(code, code), "sort": sort, "enabled": True}
            for sort, code in enumerate(locales or ["en-US"], 1)
        ],
        "categories": [
            {
                "id": ids[name],
                "builtin": False,
                "sort": sort,
                "icon": KNOWN.get(name, ({}, "sym_r_apps"))[1],
                "title": KNOWN.get(name, ({"en-US": name}, ""))[0],
                "description": {},
            }
            for sort, name in enumerate(categories, 1)
        ],
        "nav": [ids[name] for name in categories],
        "pages": [{"category_id": ids[name], "items": [{"id": "all", "type": "all"}]} for name in categories],
        "tags": [],
        "topic_lists": [],
        "topics": [],
        "recommends": [],
    }


def sync_record(
    generation: dict[str, Any], gen: GenerationName, source: SourceIdentity, previous: dict[str, Any] | None
) -> dict[str, Any]:
    """What publish keeps for the next publish and the probe: the ids no longer offered, and per part (apps,
    taxonomy) its digest and the time it last changed, from the previous catalog's generation (None: a new
    market). A time is the newest release's, or a millisecond past the part's previous time when that is
    later: it never moves back, and it moves whenever its digest does."""
    before: dict[str, Any] = previous if isinstance(previous, dict) else {}
    kept: dict[str, Any] = before["sync"] if isinstance(before.get("sync"), dict) else {}
    offered = set(generation["details"])
    listed: list[Any] = kept["removed"] if isinstance(kept.get("removed"), list) else []
    details: dict[str, Any] = before["details"] if isinstance(before.get("details"), dict) else {}
    earlier = {i for i in [*listed, *details] if isinstance(i, str) and _APP_ID.fullmatch(i)}
    removed = sorted(earlier - offered)
    newest = max((int(d["updateTime"]) * 1000 for d in generation["details"].values()), default=0)
    record: dict[str, Any] = {"removed": removed}
    digests = {
        "apps": _md5({"hash": generation["hash"], "removed": removed, "gen": gen}),
        "taxonomy": _md5(taxonomy_data(generation, source)),
    }
    for part, digest in digests.items():
        old_digest, old_time = kept.get(f"{part}_digest"), kept.get(f"{part}_time")
        old_time = old_time if isinstance(old_time, int) else 0
        record[f"{part}_digest"] = digest
        record[f"{part}_time"] = old_time if digest == old_digest else max(newest, old_time + 1)
    return record


@dataclass(frozen=True)
class Answers:
    """One generation's v2 answers as serve and the Worker send them: fixed bytes, or the values the answers
    table's templates (answers.V2_*) are filled with per request."""

    catalog: dict[str, str]  # template values but source_id: JSON texts
    taxonomy: bytes
    items: tuple[bytes, ...]
    removed: bytes  # a JSON list
    max_time: str  # a JSON integer


def answers_of(generation: dict[str, Any], gen: GenerationName, source: SourceIdentity) -> Answers:
    record = generation.get("sync")
    if not isinstance(record, dict):
        record = sync_record(generation, gen, source, None)  # published before publish kept one: as a first
    taxonomy = {"last_modify_time": int(record["taxonomy_time"]), **taxonomy_data(generation, source)}
    items = application_items(generation, gen)
    return Answers(
        catalog={
            "taxonomy_time": str(int(record["taxonomy_time"])),
            "apps_time": str(int(record["apps_time"])),
            "digest": served_json(str(record["apps_digest"])).decode("ascii"),
            "schema": f'"{SCHEMA_VERSION}"',
        },
        taxonomy=answers.V2_HEAD.encode("ascii") + served_json(taxonomy) + b"}",
        items=tuple(served_json(item) for item in items),
        removed=served_json([str(i) for i in record["removed"]]),
        max_time=str(int(record["apps_time"])),
    )


def with_sync(catalog: dict[str, Any], source: SourceIdentity, previous: Any) -> dict[str, Any]:
    """The catalog with the source's identity and each generation's sync record, carried from `previous` (the
    market's catalog.json before this publish, parsed; anything else: a new market)."""
    earlier = previous.get("generations") if isinstance(previous, dict) else None
    earlier = earlier if isinstance(earlier, dict) else {}
    generations = {
        gen: {**generation, "sync": sync_record(generation, gen, source, earlier.get(gen))}
        for gen, generation in catalog["generations"].items()
    }
    return {**catalog, "source": source.as_json(), "generations": generations}


def static_files(catalog: dict[str, Any]) -> dict[str, bytes]:
    """The v2 GET answers as files, beside v1.static_files' ones: what serve answers for a request
    without parameters (the market's own source id; every app on one page)."""
    source = SourceIdentity.of(catalog.get("source"))
    files: dict[str, bytes] = {}
    for gen, generation in catalog["generations"].items():
        found = answers_of(generation, gen, source)
        root = f"{STATIC_DIR}/{gen}/api/v2"
        files[f"{root}/catalog"] = answers.v2_catalog_answer(found.catalog, source.source_id)
        files[f"{root}/taxonomy"] = found.taxonomy
        every = answers.v2_applications_answer(found.items, found.removed, found.max_time, 1, 0)
        files[f"{root}/applications"] = files[f"{root}/browse/applications"] = every
    return files
