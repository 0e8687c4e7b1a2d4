"""The market catalog an Olares box syncs, built in memory from rendered charts (pure: no I/O).

One catalog holds both manifest generations, because one market serves boxes on both sides of Olares
1.12.6: `generations.current` for 1.12.6 and later, `generations.legacy` for 1.12.3-1.12.5. Each
generation has its own summaries, detail entries and hash, built from that generation's rendered
manifest, so the catalog can never disagree with the chart a box downloads.

Every value is derived from content: ids are md5(name)[:8], times come from changelog dates (publish fills
an undated entry with the date of the commit that added it; see dated_spec), and the hash covers the
entries and the archives' sha256 only. Publishing the same specs twice therefore gives the same bytes and the same
hash, and boxes do not re-sync for nothing.

On-disk layout of a market folder (written by folder.py, read by state.py for serve.py):
  catalog.json                          this catalog; written last, atomically (serve reloads on change)
  charts/<generation>/<name>-<version>.tgz
                                        the two generations' archives share file names, so each generation
                                        has its own folder; old versions are kept
  charts/SHA256SUMS                     digests of every archive (sha256sum -c format)
  icons/SHA256SUMS                      digests of every icon (serve gives out only what the two lists name)
  icons/<file>                          icons published from local files
  static/<generation>/api/v{1,2}/appstore/{hash,info}, static/<generation>/api/v2/{catalog,taxonomy,
  applications,browse/applications}
                                        the GET answers as files, with a _headers file (JSON content type,
                                        CORS) for static hosts and CDNs; each static/<generation>/ is one
                                        site root pinned to that generation
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

from olarespack.core import quantity
from olarespack.core.chart import Chart
from olarespack.core.yamltext import load_yaml
from olarespack.market.sections import sections
from olarespack.olares.generations import GENERATION_NAMES, GenerationName, app_id, archive_name
from olarespack.spec.models import AppSpec

CATALOG_FILE: Final = "catalog.json"
CHARTS_DIR: Final = "charts"
ICONS_DIR: Final = "icons"
STATIC_DIR: Final = "static"
DIGESTS_FILE: Final = "SHA256SUMS"
FORMAT: Final = "olarespack-market/2"
# The Olares version the static files answer with (the box adopts the `version` of the info answer for
# its detail requests, so it must stay inside the generation the file was built for).
STATIC_OLARES_VERSION: Final[dict[GenerationName, str]] = {"current": "1.12.6", "legacy": "1.12.5"}


@dataclass(frozen=True)
class MarketApp:
    """One app as one generation publishes it."""

    file: str
    spec: AppSpec
    chart: Chart
    archive_sha256: str
    icon: str  # URL as the catalog shows it

    @property
    def manifest(self) -> dict[str, Any]:
        return self.chart.manifest


def timestamp(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with 9 fractional digits: newer Olares parses nanoseconds."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond * 1000:09d}Z"


class UndatedError(ValueError):
    """A changelog without any date to place its releases in time."""


def dated_spec(spec: AppSpec, added: dict[str, dt.date] | None = None) -> AppSpec:
    """The spec with a date on every changelog entry: its own, else the date `added` knows for its version
    (the commit that added the entry), else the nearest dated entry's (older first). UndatedError when no
    entry has a date at all: a release is never published as 1970."""
    found = [entry.date or (added or {}).get(entry.version) for entry in spec.changelog]
    if not any(found):
        raise UndatedError(f"{spec.name}: no changelog entry has a date")
    for i in range(len(found)):
        if found[i] is None:
            older = next((d for d in found[i + 1 :] if d), None)
            found[i] = older or next(d for d in reversed(found[:i]) if d)
    entries = [entry.model_copy(update={"date": date}) for entry, date in zip(spec.changelog, found, strict=True)]
    return spec.model_copy(update={"changelog": entries})


def release_times(spec: AppSpec) -> list[dt.datetime]:
    """One time per changelog entry (newest first), from its date, each a second after the older one when
    they share a day: the Market keys its version history by this time, so two must never be equal."""
    times: list[dt.datetime] = []
    previous: dt.datetime | None = None
    for entry in reversed(dated_spec(spec).changelog):
        assert entry.date is not None
        moment = dt.datetime.combine(entry.date, dt.time(), tzinfo=dt.UTC)
        if previous is not None and moment <= previous:
            moment = previous + dt.timedelta(seconds=1)
        times.append(moment)
        previous = moment
    return times[::-1]


def release_epoch(spec: AppSpec) -> int:
    """Seconds since 1970 of the current release: the mtime stamped on every file of its archive."""
    return int(release_times(spec)[0].timestamp())


# The last update of a market without apps: fixed, so output never depends on the clock.
_NO_APPS: Final = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def served_json(value: Any) -> bytes:
    """The bytes the server and the static files send (compact; key order as built)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --------------------------------------------------------------------------- entries


def _manifest(chart: Chart, path: str) -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(chart[path])
    return data


def _cores(millicores: int) -> str:
    """'4', '2.1', '0.25': Olares reads requiredCPU as a number of cores."""
    whole, frac = divmod(millicores, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def _resources(manifest: dict[str, Any]) -> dict[str, str]:
    spec = manifest["spec"]
    # current manifests declare one accelerator entry (nvidia); legacy ones use flat fields
    source = spec["accelerator"][0] if spec.get("accelerator") else spec
    gpu = source.get("requiredGPUMemory") or source.get("requiredGpu")
    return {
        "requiredCPU": _cores(quantity.parse_cpu(str(source["requiredCpu"]))),
        "requiredMemory": str(quantity.parse_bytes(str(source["requiredMemory"]))),
        "requiredDisk": str(quantity.parse_bytes(str(source["requiredDisk"]))),
        "requiredGPU": str(quantity.parse_bytes(str(gpu))) if gpu else "0",
    }


def _i18n(chart: Chart, locales: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for locale in locales:
        texts = _manifest(chart, f"i18n/{locale}/OlaresManifest.yaml")
        result[locale] = {
            "metadata": {"title": texts["metadata"]["title"], "description": texts["metadata"]["description"]},
            "entrances": None,
            "spec": {
                "fullDescription": texts["spec"]["fullDescription"],
                "upgradeDescription": texts["spec"]["upgradeDescription"],
            },
        }
    return result


def _entrances(manifest: dict[str, Any], icon: str) -> list[dict[str, Any]]:
    return [
        {
            "name": e["name"],
            "host": e["host"],
            "port": e["port"],
            "title": e["title"],
            "icon": icon,
            "authLevel": e.get("authLevel", "private"),
            "invisible": bool(e.get("invisible", False)),
            "openMethod": e.get("openMethod", "default"),
            "disablePreload": bool(e.get("disablePreload", False)),
        }
        for e in manifest.get("entrances", [])
    ]


def _version_history(spec: AppSpec) -> list[dict[str, str]]:
    return [
        {
            "appName": spec.name,
            "version": entry.version,
            "versionName": entry.version,
            "mergedAt": timestamp(moment),
            "upgradeDescription": entry.note.strip(),
        }
        for entry, moment in zip(spec.changelog, release_times(spec), strict=True)
    ]


def summary_entry(app: MarketApp) -> dict[str, Any]:
    meta = app.manifest["metadata"]
    return {
        "id": app_id(app.spec.name),
        "name": app.spec.name,
        "version": str(meta["version"]),
        "category": meta["categories"][0],
        "description": meta["description"],
        "icon": app.icon,
        "screenshots": None,
        "tags": None,
        "metadata": None,
        "source": 1,
        "updated_at": timestamp(release_times(app.spec)[0]),
    }


def detail_entry(app: MarketApp) -> dict[str, Any]:
    """An ApplicationInfoEntry with every field of the reference catalog, read from the rendered manifest."""
    manifest = app.manifest
    meta, spec = manifest["metadata"], manifest["spec"]
    times = release_times(app.spec)
    ident = app_id(app.spec.name)
    version = str(meta["version"])
    entry: dict[str, Any] = {
        "id": ident,
        "name": app.spec.name,
        "cfgType": manifest.get("olaresManifest.type", "app"),
        "chartName": archive_name(app.spec.name, version),
        "icon": app.icon,
        "description": meta["description"],
        "appID": ident,
        "title": meta["title"],
        "version": version,
        "categories": list(meta["categories"]),
        "versionName": str(spec.get("versionName", version)),
        "fullDescription": spec["fullDescription"],
        "upgradeDescription": spec["upgradeDescription"],
        "promoteImage": None,
        "promoteVideo": "",
        "subCategory": "",
        "locale": list(spec["locale"]),
        "developer": spec["developer"],
        **_resources(manifest),
        "supportClient": {},
        "supportArch": list(spec["supportArch"]),
        "rating": 0,
        "target": "",
        "permission": manifest.get("permission", {}),
        "entrances": _entrances(manifest, app.icon),
        "middleware": None,
        "options": manifest.get("options", {}),
        "envs": manifest.get("envs", []),
        "submitter": spec["submitter"],
        "doc": "",
        "website": spec.get("website", ""),
        "featuredImage": "",
        "sourceCode": spec.get("sourceCode", ""),
        "license": spec.get("license", []),
        "legal": None,
        "i18n": _i18n(app.chart, list(spec["locale"])),
        "namespace": "",
        "onlyAdmin": False,
        "lastCommitHash": "",
        "createTime": int(times[-1].timestamp()),
        "updateTime": int(times[0].timestamp()),
        "count": None,
        "versionHistory": _version_history(app.spec),
        "screenshots": None,
        "tags": None,
        "metadata": None,
        "updated_at": timestamp(times[0]),
    }
    return entry


# --------------------------------------------------------------------------- catalog


def build_generation(apps: list[MarketApp], generation: GenerationName) -> dict[str, Any]:
    ordered = sorted(apps, key=lambda a: a.spec.name)
    summaries = {app_id(a.spec.name): summary_entry(a) for a in ordered}
    details = {app_id(a.spec.name): detail_entry(a) for a in ordered}
    archives = {archive_name(a.spec.name, a.spec.version): a.archive_sha256 for a in ordered}
    newest_first = sorted(summaries.values(), key=lambda s: s["name"])
    newest_first.sort(key=lambda s: s["updated_at"], reverse=True)  # stable: names ascend within a time
    content = {"generation": generation, "apps": summaries, "details": details, "archives": archives}
    return {
        "hash": hashlib.md5(canonical_json(content), usedforsecurity=False).hexdigest(),
        "last_updated": max((s["updated_at"] for s in summaries.values()), default=timestamp(_NO_APPS)),
        "olares_version": STATIC_OLARES_VERSION[generation],
        "apps": summaries,
        "details": details,
        "latest": [s["name"] for s in newest_first],
        # the Market resolves a top by app name (center.ts _getTopList), whatever the field is called
        "tops": [{"appId": s["name"], "appid": s["name"], "rank": rank} for rank, s in enumerate(newest_first, 1)],
        "sections": sections([(s["name"], list(details[s["id"]]["categories"])) for s in newest_first]),
        "charts": {a.spec.name: archive_name(a.spec.name, a.spec.version) for a in ordered},
        "archives": archives,
    }


def build_catalog(apps: dict[GenerationName, list[MarketApp]]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "generations": {gen: build_generation(apps[gen], gen) for gen in GENERATION_NAMES if gen in apps},
    }


def catalog_bytes(catalog: dict[str, Any]) -> bytes:
    """catalog.json: indented so a republish shows a readable diff; key order as built (deterministic)."""
    return (json.dumps(catalog, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
