"""The catalog, built in memory from the seed apps' rendered charts: ids, fields, times, hashes."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import semver

from conftest import APP_FILES, ROOT, spec_version
from olarespack.market import catalog as market
from olarespack.market import v1
from olarespack.market.sections import sections
from olarespack.olares.generations import GenerationName
from olarespack.project import App, render_apps
from specs import app_data, write_spec

# shared/ sits beside the repository (and beside CI's clone); the field list below holds without it
_REFERENCE_FILE = ROOT.parent / "shared/reference/seed-market/catalog-excerpt.json"
REFERENCE = json.loads(_REFERENCE_FILE.read_text(encoding="utf-8")) if _REFERENCE_FILE.is_file() else None
# The fields of the reference catalog's entries (the hand-written market boxes already sync from).
DETAIL_FIELDS = {
    "id",
    "name",
    "cfgType",
    "chartName",
    "icon",
    "description",
    "appID",
    "title",
    "version",
    "categories",
    "versionName",
    "fullDescription",
    "upgradeDescription",
    "promoteImage",
    "promoteVideo",
    "subCategory",
    "locale",
    "developer",
    "requiredMemory",
    "requiredDisk",
    "supportClient",
    "supportArch",
    "requiredGPU",
    "requiredCPU",
    "rating",
    "target",
    "permission",
    "entrances",
    "middleware",
    "options",
    "submitter",
    "doc",
    "website",
    "featuredImage",
    "sourceCode",
    "license",
    "legal",
    "i18n",
    "namespace",
    "onlyAdmin",
    "lastCommitHash",
    "createTime",
    "updateTime",
    "count",
    "versionHistory",
    "screenshots",
    "tags",
    "metadata",
    "updated_at",
}
SUMMARY_FIELDS = {
    "id",
    "name",
    "version",
    "category",
    "description",
    "icon",
    "screenshots",
    "tags",
    "metadata",
    "source",
    "updated_at",
}
NANO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")
VISION = "vllmgemma426ba4bvisionone"


def market_apps(apps: list[App], digests: dict[str, str] | None = None) -> list[market.MarketApp]:
    return [
        market.MarketApp(a.file, a.spec, a.chart, (digests or {}).get(a.spec.name, "0" * 64), a.spec.metadata.icon)
        for a in apps
    ]


def catalog_of(files: list[Path], digests: dict[str, str] | None = None) -> dict[str, Any]:
    gens: tuple[GenerationName, ...] = ("current", "legacy")
    return market.build_catalog({gen: market_apps(render_apps(files, [gen]), digests) for gen in gens})


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    return catalog_of(APP_FILES)


def by_name(generation: dict[str, Any], name: str) -> dict[str, Any]:
    detail: dict[str, Any] = generation["details"][market.app_id(name)]
    return detail


def test_ids_are_olares_ids() -> None:
    assert market.app_id(VISION) == "b3078d17"
    assert market.app_id("llamacppgemma4audione") == "8c6443a7"
    assert market.app_id("vllmgemma4dflashone") == "18a6f781"


def test_entries_carry_every_field_of_the_reference(catalog: dict[str, Any]) -> None:
    if REFERENCE is not None:  # the reference lives in shared/, next to the repository
        assert set(REFERENCE["details"]["b3078d17"]) == DETAIL_FIELDS
        assert set(REFERENCE["summaries"]["b3078d17"]) == SUMMARY_FIELDS
    for generation in catalog["generations"].values():
        assert len(generation["details"]) == 3
        for ident, detail in generation["details"].items():
            assert set(detail) >= DETAIL_FIELDS, DETAIL_FIELDS - set(detail)
            assert detail["id"] == detail["appID"] == ident == market.app_id(detail["name"])
            assert detail["chartName"] == f"{detail['name']}-{detail['version']}.tgz"
            assert set(generation["apps"][ident]) == SUMMARY_FIELDS
            assert generation["apps"][ident]["id"] == ident


def test_generations_differ_in_manifest_and_hash(catalog: dict[str, Any]) -> None:
    current, legacy = catalog["generations"]["current"], catalog["generations"]["legacy"]
    dependency = {
        gen: by_name(catalog["generations"][gen], VISION)["options"]["dependencies"][0]["version"]
        for gen in ("current", "legacy")
    }
    assert dependency == {"current": ">=1.12.6-0", "legacy": ">=1.12.3-0,<1.12.6"}
    assert current["hash"] != legacy["hash"]
    assert re.fullmatch(r"[0-9a-f]{32}", current["hash"])


def test_resources_are_cores_and_bytes(tmp_path: Path) -> None:
    data = app_data()
    data["resources"] = {
        "cpu": {"request": "1500m", "limit": 16},
        "memory": {"request": "3Gi", "limit": "40Gi"},
        "disk": {"request": "30Gi", "limit": "50Gi"},
        "gpu_memory": {"request": "24000Mi", "limit": "24000Mi"},
    }
    catalog = catalog_of([write_spec(tmp_path, data)])
    for generation in catalog["generations"].values():
        detail = by_name(generation, VISION)
        assert (detail["requiredCPU"], detail["requiredMemory"], detail["requiredDisk"], detail["requiredGPU"]) == (
            "1.5",
            str(3 * 2**30),
            str(30 * 2**30),
            str(24000 * 2**20),
        )


def test_times_come_from_changelog_dates(catalog: dict[str, Any]) -> None:
    generation = catalog["generations"]["current"]
    vision = by_name(generation, VISION)
    # 1.0.5, 1.0.2 and 1.0.1 have no date here (no git history): they take 1.0.0's 2026-05-14, each a second
    # after the one before, because the Market keys its version history by mergedAt
    assert [h["version"] for h in vision["versionHistory"]] == [
        "1.2.3",
        "1.2.2",
        "1.2.1",
        "1.2.0",
        "1.1.0",
        "1.0.5",
        "1.0.2",
        "1.0.1",
        "1.0.0",
    ]
    assert [h["mergedAt"] for h in vision["versionHistory"]] == [
        "2026-12-06T00:00:01.000000000Z",
        "2026-12-06T00:00:00.000000000Z",
        "2026-12-02T00:00:00.000000000Z",
        "2026-12-01T00:00:00.000000000Z",
        "2026-11-30T00:00:00.000000000Z",
    ] + [f"2026-05-14T00:00:0{s}.000000000Z" for s in (3, 2, 1, 0)]
    assert vision["updated_at"] == "2026-12-06T00:00:01.000000000Z"
    dflash = by_name(generation, "vllmgemma4dflashone")
    assert [h["mergedAt"][:10] for h in dflash["versionHistory"]] == [
        "2026-12-06",
        "2026-12-06",
        "2026-12-02",
        "2026-11-30",
        "2026-05-11",
        "2026-05-09",
        "2026-05-09",
        "2026-05-09",
        "2026-05-09",
    ]
    assert len({h["mergedAt"] for h in dflash["versionHistory"]}) == len(dflash["versionHistory"])
    assert not [d for d in generation["details"].values() for h in d["versionHistory"] if h["mergedAt"] < "2026"]
    # the market's time is its newest release's, whichever app made it
    assert generation["last_updated"] == max(d["versionHistory"][0]["mergedAt"] for d in generation["details"].values())
    for detail in generation["details"].values():
        assert NANO_TIME.match(detail["updated_at"])
        assert all(NANO_TIME.match(h["mergedAt"]) for h in detail["versionHistory"])
        assert detail["versionHistory"][0]["upgradeDescription"]


def test_i18n_has_every_locale_of_the_chart(catalog: dict[str, Any]) -> None:
    vision = by_name(catalog["generations"]["current"], VISION)
    assert vision["locale"] == ["en-US", "fr-FR"]
    assert set(vision["i18n"]) == {"en-US", "fr-FR"}
    french = vision["i18n"]["fr-FR"]
    assert "avec vision" in french["metadata"]["description"]
    assert french["spec"]["upgradeDescription"].startswith(f"v{spec_version('gemma4-vision')}:")
    assert french["entrances"] is None


def test_catalog_is_deterministic(catalog: dict[str, Any]) -> None:
    assert market.catalog_bytes(catalog_of(APP_FILES)) == market.catalog_bytes(catalog)


BUMPED = str(semver.Version.parse(spec_version("gemma4-vision")).bump_patch())  # above the committed vision app


def test_a_bump_changes_the_hash_and_only_that_app(tmp_path: Path, catalog: dict[str, Any]) -> None:
    data = app_data()
    data["version"] = BUMPED
    # a day after every committed release, so the bumped app is the newest of the market
    newest = max(dt.date.fromisoformat(catalog["generations"]["current"]["last_updated"][:10]), dt.date(2026, 12, 2))
    day = newest + dt.timedelta(days=1)
    data["changelog"].insert(0, {"version": BUMPED, "date": day, "note": "bumped for the test"})
    files = [f for f in APP_FILES if f.stem != "gemma4-vision"] + [write_spec(tmp_path, data, "vision.yaml")]
    bumped = catalog_of(files)
    for gen, generation in bumped["generations"].items():
        before = catalog["generations"][gen]
        assert generation["hash"] != before["hash"]
        vision = market.app_id(VISION)
        assert generation["apps"][vision]["version"] == BUMPED
        assert generation["details"][vision]["chartName"] == f"{VISION}-{BUMPED}.tgz"
        for ident in set(generation["details"]) - {vision}:
            assert generation["details"][ident] == before["details"][ident]
            assert generation["apps"][ident] == before["apps"][ident]
        assert generation["latest"][0] == VISION and generation["last_updated"].startswith(day.isoformat())


def test_the_hash_covers_the_archives(catalog: dict[str, Any]) -> None:
    other = catalog_of(APP_FILES, {VISION: hashlib.sha256(b"another archive").hexdigest()})
    assert other["generations"]["current"]["hash"] != catalog["generations"]["current"]["hash"]


def test_answers_have_the_shape_the_box_reads(catalog: dict[str, Any]) -> None:
    generation = catalog["generations"]["legacy"]
    info = v1.info_answer(generation, "1.12.5")
    assert (info["version"], info["hash"]) == ("1.12.5", generation["hash"])
    assert set(info["data"]) == {"apps", "recommends", "pages", "topics", "topic_lists", "tops", "latest", "tags"}
    assert all(entry["id"] == key for key, entry in info["data"]["apps"].items())
    assert [t["rank"] for t in info["data"]["tops"]] == [1, 2, 3]
    # the Market resolves tops by app name
    assert {t["appId"] for t in info["data"]["tops"]} == {a["name"] for a in info["data"]["apps"].values()}
    # a menu entry and a page for All and for every category the apps declare (AI)
    assert set(info["data"]["tags"]) == set(info["data"]["pages"]) == {"All", "AI"}
    assert info["data"]["tags"]["AI"]["name"] == "AI" and isinstance(info["data"]["tags"]["AI"]["sort"], int)
    sections = json.loads(info["data"]["pages"]["AI"]["content"])
    assert {"type": "Default Topic", "id": "Newest"} in sections
    [topic_list] = [s["id"] for s in sections if s["type"] == "Topic"]
    topic_id = info["data"]["topic_lists"][topic_list]["content"]
    apps = info["data"]["topics"][topic_id]["data"]["en-US"]["apps"].split(",")
    assert sorted(apps) == sorted(a["name"] for a in info["data"]["apps"].values())
    assert sorted(info["data"]["latest"]) == sorted(a["name"] for a in info["data"]["apps"].values())
    assert v1.hash_answer(generation, "1.12.4") == {
        "hash": generation["hash"],
        "last_updated": generation["last_updated"],
        "version": "1.12.4",
    }


def test_static_files_are_one_site_root_per_generation(catalog: dict[str, Any]) -> None:
    files = v1.static_files(catalog)
    for gen, version in market.STATIC_OLARES_VERSION.items():
        assert b"Content-Type: application/json" in files[f"static/{gen}/_headers"]
        for api in ("v1", "v2"):
            answer = json.loads(files[f"static/{gen}/api/{api}/appstore/hash"])
            assert answer == {
                "hash": catalog["generations"][gen]["hash"],
                "last_updated": catalog["generations"][gen]["last_updated"],
                "version": version,
            }
            info = json.loads(files[f"static/{gen}/api/{api}/appstore/info"])
            assert info["version"] == version and len(info["data"]["apps"]) == 3


@pytest.mark.parametrize(("millicores", "text"), [(4000, "4"), (2100, "2.1"), (250, "0.25"), (1234, "1.234")])
def test_cores(millicores: int, text: str) -> None:
    assert market._cores(millicores) == text


def test_categories_that_slug_alike_keep_their_own_pages() -> None:
    info = sections([("a", ["Home Lab"]), ("b", ["home-lab"]), ("c", ["All", "AI"])])
    assert list(info["tags"]) == ["All", "AI", "Home Lab", "home-lab"]
    assert len({tag["_id"] for tag in info["tags"].values()}) == 4
    for category, app in (("Home Lab", "a"), ("home-lab", "b"), ("AI", "c")):
        [topic] = [t for t in info["topics"].values() if t["data"]["en-US"]["group"] == category]
        assert topic["data"]["en-US"]["apps"] == app
        listed = json.loads(info["pages"][category]["content"])
        assert {"type": "Topic", "id": topic["name"]} in listed
