"""What a hand-written chart says besides its server's command line: the market texts, entrance, resources,
startup budget and release notes, read from OlaresManifest.yaml, Chart.yaml, owners and the engine
container, as spec fields."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import semver
import yaml

from olarespack.core.chart import Chart
from olarespack.core.hardware import profiles

DEFAULT_STARTUP_MINUTES = 45
_RELEASE_LINE = re.compile(r"^\s*[-*]?\s*v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\s*[:\-—]\s*(.*)$")

if TYPE_CHECKING:
    from olarespack.importer import ImportResult


def _str(value: Any) -> str | None:
    return None if value is None else str(value).strip() or None


def _locale_texts(chart: Chart, default: str) -> dict[str, dict[str, str]]:
    """Other locales' texts from i18n/<locale>/OlaresManifest.yaml (the default locale's are the manifest's)."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(chart):
        match = re.fullmatch(r"i18n/([a-z]{2}-[A-Z]{2})/OlaresManifest\.yaml", path)
        if not match or match.group(1) == default:
            continue
        try:
            data = yaml.safe_load(chart[path])
        except yaml.YAMLError:
            continue
        if not isinstance(data, dict):
            continue
        meta, spec = data.get("metadata") or {}, data.get("spec") or {}
        given = {
            "title": _str(meta.get("title")),
            "description": _str(meta.get("description")),
            "full_description": _str(spec.get("fullDescription")),
        }
        texts = {k: v for k, v in given.items() if v}
        if texts:
            found[match.group(1)] = texts
    return found


def metadata(
    chart: Chart, notes: list[str], unexpressed: list[str], given_owners: tuple[str, ...] = ()
) -> dict[str, Any]:
    manifest = chart.manifest
    meta: Mapping[str, Any] = manifest.get("metadata") or {}
    spec: Mapping[str, Any] = manifest.get("spec") or {}
    title = _str(meta.get("title")) or chart.name
    if len(title) > 30:
        unexpressed.append(f"metadata.title {title!r}: over 30 characters, cut")
        title = title[:30].rstrip()
    description = _str(meta.get("description")) or title
    owners = [line.strip().strip("'\"- ") for line in chart.get("owners", "").splitlines()]
    owners = [o for o in owners if re.fullmatch(r"[A-Za-z0-9-]{1,39}", o) and o != "owners:"]
    if not owners:
        owners = [str(o) for o in manifest.get("owners") or [] if re.fullmatch(r"[A-Za-z0-9-]{1,39}", str(o))]
    if given_owners and owners and list(given_owners) != owners:
        notes.append(
            f"owners: {', '.join(given_owners)} (--owners), where the chart's owners file says {', '.join(owners)}"
        )
    owners = list(given_owners) or owners
    developer = _str(spec.get("developer"))
    submitter = _str(spec.get("submitter")) or developer
    found: dict[str, Any] = {
        "title": title,
        "description": description,
        "full_description": _str(spec.get("fullDescription")) or description,
        "icon": _str(meta.get("icon")),
        "categories": [str(c) for c in meta.get("categories") or []] or ["AI"],
        "developer": developer or submitter or (owners[0] if owners else None),
        "submitter": submitter or (owners[0] if owners else None),
        "website": _str(spec.get("website")),
        "source_code": _str(spec.get("sourceCode")),
        "license": [
            {"text": _str(lic.get("text")), "url": _str(lic.get("url"))}
            for lic in spec.get("license") or []
            if isinstance(lic, dict)
        ],
        "owners": owners,
    }
    for key in ("icon", "developer", "submitter"):
        if not found[key]:
            unexpressed.append(f"metadata.{key}: the chart has none; the spec needs one")
    if not found["license"]:
        unexpressed.append("metadata.license: the manifest names no license; the spec needs one")
    if not owners:
        unexpressed.append(
            "metadata.owners: no owners file; the spec needs the GitHub users who own the app (give them with --owners)"
        )
    locales = _locale_texts(chart, "en-US")
    if locales:
        found["locales"] = locales
    return {k: v for k, v in found.items() if v not in (None, [])} | {"license": found["license"]}


def entrance(manifest: Mapping[str, Any], title: str, notes: list[str], unexpressed: list[str]) -> dict[str, Any]:
    entrances = manifest.get("entrances") or []
    if len(entrances) > 1:
        unexpressed.append(f"entrances: {len(entrances)} entrances; the spec's chart has one (the server's)")
    first = entrances[0] if entrances and isinstance(entrances[0], dict) else {}
    found: dict[str, Any] = {}
    wanted = _str(first.get("title")) or title
    # an entrance title is letters, digits, spaces and dashes (the market's own titles are freer)
    plain = re.sub(r"\s+", " ", re.sub(r"[^A-Za-z0-9 -]", "", wanted)).strip()[:30] or "App"
    if plain != wanted:
        notes.append(
            f"entrance title {wanted!r} is {plain!r}: an entrance title holds letters, digits, spaces and dashes"
        )
    if plain != title:
        found["title"] = plain
    for key, field in (("authLevel", "auth_level"), ("openMethod", "open_method")):
        if _str(first.get(key)):
            found[field] = _str(first.get(key))
    return found


def _quantity_text(value: Any) -> str | None:
    return None if value is None else str(value)


def resources(
    container: Mapping[str, Any], manifest: Mapping[str, Any], notes: list[str], unexpressed: list[str]
) -> dict[str, Any]:
    res: Mapping[str, Any] = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    spec: Mapping[str, Any] = manifest.get("spec") or {}
    accelerators = spec.get("accelerator")
    if isinstance(accelerators, list) and accelerators and isinstance(accelerators[0], dict):
        # a current (0.12.0) manifest's envelope is its accelerator entry; the flat fields are gone
        if len(accelerators) > 1:
            notes.append(
                f"spec.accelerator: {len(accelerators)} entries; the first ({accelerators[0].get('mode')}) "
                "gives the envelope, the spec's chart declares its hardware profile's"
            )
        first = accelerators[0]
        spec = {
            **spec,
            **{
                key: first[key]
                for key in (
                    "requiredCpu",
                    "limitedCpu",
                    "requiredMemory",
                    "limitedMemory",
                    "requiredDisk",
                    "limitedDisk",
                )
                if key in first
            },
            "requiredGpu": first.get("requiredGPUMemory"),
            "limitedGpu": first.get("limitedGPUMemory"),
        }
    found: dict[str, Any] = {}
    for key, manifest_keys in (("cpu", ("requiredCpu", "limitedCpu")), ("memory", ("requiredMemory", "limitedMemory"))):
        request = _quantity_text(requests.get(key) or spec.get(manifest_keys[0]))
        limit = _quantity_text(limits.get(key) or spec.get(manifest_keys[1]) or request)
        if request is None:
            unexpressed.append(f"resources.{key}: the engine container requests none")
            continue
        found[key] = {"request": request, "limit": limit}
    disk_request, disk_limit = _quantity_text(spec.get("requiredDisk")), _quantity_text(spec.get("limitedDisk"))
    if disk_request:  # without one the spec is refused at resources.disk, which says so
        found["disk"] = {"request": disk_request, "limit": disk_limit or disk_request}
    gpu = (_str(spec.get("requiredGpu")), _str(spec.get("limitedGpu")))
    if any(gpu):
        notes.append(
            f"GPU memory: the chart asked {gpu[0] or '-'} to {gpu[1] or '-'}; the spec books the hardware "
            "profile's amount, requested and limited alike (set resources.gpu_memory to change it)"
        )
    return found


_HAMI_LIMIT = re.compile(r"^([0-9]{1,7})([mMgG]?)$")


def hami_booking(env: Mapping[str, str], hardware_mib: int, notes: list[str]) -> dict[str, str] | None:
    """The GPU memory the engine ran under where the chart says it: HAMi's CUDA_DEVICE_MEMORY_LIMIT_0 (m = MiB,
    g = GiB, a bare number bytes), which the seed author's charts set (24400m) because Olares' default 0m reads
    as zero bytes. The spec books that much, request = limit, when the card registers it."""
    text = env.get("CUDA_DEVICE_MEMORY_LIMIT_0", "").strip()
    match = _HAMI_LIMIT.match(text)
    if not match:
        return None
    number, unit = int(match[1]), match[2].lower()
    mib = number * 1024 if unit == "g" else number if unit == "m" else number // 2**20
    if not 0 < mib <= hardware_mib:
        notes.append(
            f"GPU memory: CUDA_DEVICE_MEMORY_LIMIT_0={text} is not what this card registers "
            f"({hardware_mib} MiB); the spec books the hardware profile's amount"
        )
        return None
    notes.append(
        f"GPU memory: the engine ran under HAMi's CUDA_DEVICE_MEMORY_LIMIT_0={text}; the spec books "
        f"{mib}Mi, requested and limited alike"
    )
    return {"request": f"{mib}Mi", "limit": f"{mib}Mi"}


def startup_minutes(container: Mapping[str, Any], notes: list[str]) -> int | None:
    probe = container.get("startupProbe") or {}
    if not probe:
        return None
    seconds = int(probe.get("initialDelaySeconds") or 0) + int(probe.get("periodSeconds") or 10) * int(
        probe.get("failureThreshold") or 3
    )
    minutes = math.ceil(seconds / 60)
    if minutes <= 30:
        notes.append(
            f"startup probe: the chart allowed {minutes} min; the spec allows at least 31 (a first boot "
            f"downloads the model), {DEFAULT_STARTUP_MINUTES} by default"
        )
        return None
    return min(minutes, 240)


def next_release(installed: str) -> str:
    """The first version of an imported app: one patch above the installed chart's (a version that is no SemVer
    stays as it is, for the spec's own check to name)."""
    if not semver.Version.is_valid(installed):
        return installed
    return str(semver.Version.parse(installed).bump_patch())


def upgrade_note(installed: str) -> str:
    return (
        f"The app as olarespack builds it from its spec, after the hand-written chart {installed}. Upgrading "
        "restarts the app."
    )


def changelog(manifest: Mapping[str, Any], version: str, notes: list[str]) -> list[dict[str, Any]]:
    """Release notes from upgradeDescription: lines starting `vX.Y.Z:` open an entry; text without any
    becomes the note of the chart's own version."""
    text = str((manifest.get("spec") or {}).get("upgradeDescription") or "").strip()
    entries: list[dict[str, Any]] = []
    for line in text.splitlines():
        match = _RELEASE_LINE.match(line)
        if match and _valid(match.group(1)):
            entries.append({"version": match.group(1), "note": match.group(2).strip()})
        elif entries and line.strip():
            entries[-1]["note"] = f"{entries[-1]['note']}\n{line.strip()}".strip()
    if not entries:
        return [{"version": version, "note": text or "Imported from the hand-written chart."}]
    seen: set[str] = set()
    kept = []
    for entry in sorted(entries, key=lambda e: parse_version(e["version"]), reverse=True):
        if entry["version"] in seen:
            notes.append(f"changelog: {entry['version']} is noted twice; the first note is kept")
            continue
        seen.add(entry["version"])
        entry["note"] = entry["note"] or "(no note)"
        kept.append(entry)
    if kept[0]["version"] != version:
        if parse_version(kept[0]["version"]) > parse_version(version):
            notes.append(f"changelog: notes above the chart's version {version} are dropped")
            kept = [e for e in kept if parse_version(e["version"]) <= parse_version(version)]
        if not kept or kept[0]["version"] != version:
            kept.insert(0, {"version": version, "note": "Imported from the hand-written chart."})
    return kept


def parse_version(version: str) -> semver.Version:
    return semver.Version.parse(version)


def _valid(version: str) -> bool:
    try:
        parse_version(version)
    except ValueError:
        return False
    return True


def spec_data(
    chart: Any,
    container: Mapping[str, Any],
    env: Mapping[str, str],
    engine_data: dict[str, Any],
    hardware: str,
    result: ImportResult,
    owners: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The spec's data around its engine block: name, version one patch above the chart's, texts, entrance,
    resources (the GPU memory the engine ran under, when the chart says it), startup budget, release notes."""
    manifest = chart.manifest
    version = str(
        (manifest.get("metadata") or {}).get("version")
        or (chart.get("Chart.yaml", "") and (yaml.safe_load(chart["Chart.yaml"]) or {}).get("version"))
        or "0.1.0"
    )
    meta = metadata(chart, result.notes, result.unexpressed, owners)
    installed = version
    # the spec's chart is not the hand-written one (manifest, pod, templates): it ships as an upgrade above it,
    # so a box that installed the hand-written chart sees it, whatever order import, commit and bump run in
    version = next_release(installed)
    data: dict[str, Any] = {"name": chart.name, "version": version, "hardware": hardware, "metadata": meta}
    found = entrance(manifest, meta["title"], result.notes, result.unexpressed)
    if found:
        data["entrance"] = found
    data["engine"] = engine_data
    data["resources"] = resources(container, manifest, result.notes, result.unexpressed)
    booked = hami_booking(env, profiles()[hardware].gpu_memory_mib, result.notes)
    if booked:
        data["resources"]["gpu_memory"] = booked
        result.notes[:] = [n for n in result.notes if "the spec books the hardware profile's amount" not in n]
    minutes = startup_minutes(container, result.notes)
    if minutes:
        data["startup_timeout_minutes"] = minutes
    data["changelog"] = [
        {"version": version, "note": upgrade_note(installed)},
        *changelog(manifest, installed, result.notes),
    ]
    result.notes.append(
        f"version {version}: one patch above the installed chart's {installed}, so boxes see the "
        "upgrade (`olarespack bump` raises it further)"
    )
    return data
