"""The steps of a box's sync of a market source (market/check.py walks them per Olares version): what each one
records (take, skip, abort, note), how an answer is read (bounded JSON, a field of the type the box's Go decoder
needs), and the two steps both sequences end with, the apps' details and their charts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from olarespack.core import boundedjson
from olarespack.market.remote import Fetch, chart_archive, shown
from olarespack.olares.generations import app_id, parse_archive_name
from olarespack.olares.versions import satisfies

Verdict = Literal["take", "skip", "abort", "note"]
BATCH: Final = 10  # ids per detail request, as the syncer sends them
MAX_APPS: Final = 2_000  # a market listing more is reported as such, not walked


@dataclass(frozen=True)
class Step:
    olares: str
    call: str
    verdict: Verdict
    detail: str

    def line(self) -> str:
        return f"{self.olares:<8} {self.verdict:<5} {self.call}: {self.detail}"


@dataclass
class Walk:
    """One Olares version's sync: its steps and the apps the box ends with (name -> version)."""

    olares: str
    steps: list[Step] = field(default_factory=list)
    apps: dict[str, str] = field(default_factory=dict)

    def add(self, call: str, verdict: Verdict, detail: str) -> Step:
        step = Step(self.olares, call, verdict, detail)
        self.steps.append(step)
        return step

    @property
    def aborted(self) -> bool:
        return any(s.verdict == "abort" for s in self.steps)


class Abort(Exception):
    """The box stops syncing the source (the step is recorded)."""


# --------------------------------------------------------------------------- reading answers


def get(fetch: Fetch, walk: Walk, method: str, path: str, body: Any = None) -> tuple[int, str, bytes]:
    try:
        return fetch(method, path, body)
    except OSError as exc:
        walk.add(f"{method} {path}", "abort", f"unreachable ({shown(str(exc), 200)})")
        raise Abort from None


def answer_json(walk: Walk, call: str, status: int, data: bytes, why_abort: str) -> Any:
    """The JSON of a 200 answer; anything else aborts with why the box stops there."""
    if status != 200:
        text = data[:200].decode("utf-8", "replace")
        walk.add(call, "abort", f"HTTP {status} ({shown(text, 80)}): {why_abort}")
        raise Abort
    try:
        return boundedjson.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        walk.add(call, "abort", f"not JSON ({shown(str(exc), 80)}): {why_abort}")
        raise Abort from None


def field_of(walk: Walk, call: str, value: Any, where: str, kind: type | tuple[type, ...], why: str) -> Any:
    """A field the box's decoder needs with this type: anything else fails the decode, which aborts."""
    if isinstance(value, bool) or not isinstance(value, kind):
        found = "missing" if value is None else f"{type(value).__name__} {shown(value, 60)}"
        walk.add(call, "abort", f"{where}: {found}, expected {kind_name(kind)}: {why}")
        raise Abort
    return value


def kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", str: "a string", dict: "an object", list: "a list"}
    return " or ".join(names.get(k, k.__name__) for k in (kind if isinstance(kind, tuple) else (kind,)))


def details(
    fetch: Fetch, walk: Walk, ids: list[str], path: str, fallback: str | None, version: str | None = None
) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        body = {"app_ids": batch, "version": version or walk.olares}
        status, _, data = get(fetch, walk, "POST", path, body)
        used = path
        if status == 404 and fallback:
            status, _, data = get(fetch, walk, "POST", fallback, body)
            used = fallback
        call = f"POST {used} ({len(batch)} id(s))"
        answer = field_of(
            walk,
            call,
            answer_json(walk, call, status, data, "the box gets no details"),
            "the answer",
            dict,
            "an object {apps, version, not_found}",
        )
        entries = answer.get("apps") if isinstance(answer.get("apps"), dict) else {}
        for ident in batch:
            entry = entries.get(ident)
            if not isinstance(entry, dict):
                walk.add(
                    call,
                    "skip",
                    f"app id {shown(ident, 40)}: no detail entry (the id the list gave does not "
                    "come back from the details)",
                )
                continue
            found[ident] = entry
        walk.add(call, "take", f"{sum(1 for i in batch if i in found)} detail(s)")
    for ident, entry in list(found.items()):
        name, version_text = entry.get("name"), entry.get("version")
        if not isinstance(name, str) or app_id(name) != ident:
            walk.add(
                "details",
                "skip",
                f"app id {shown(ident, 40)}: name {shown(name, 40)} is not the app's (Olares' id is md5(name)[:8])",
            )
            del found[ident]
            continue
        dependency = olares_dependency(entry)
        if dependency and satisfies(walk.olares, dependency) is False:
            walk.add(
                "details",
                "skip",
                f"{name}: its manifest needs Olares {shown(dependency, 40)}: a {walk.olares} box refuses to install it",
            )
            del found[ident]
            continue
        if not isinstance(version_text, str):
            walk.add("details", "skip", f"{name}: no version")
            del found[ident]
    return found


def olares_dependency(entry: dict[str, Any]) -> str | None:
    options = entry.get("options")
    dependencies = options.get("dependencies") if isinstance(options, dict) else None
    for dependency in dependencies if isinstance(dependencies, list) else []:
        if isinstance(dependency, dict) and dependency.get("name") == "olares":
            version = dependency.get("version")
            return version if isinstance(version, str) else None
    return None


def charts_of(
    fetch: Fetch,
    walk: Walk,
    details: dict[str, dict[str, Any]],
    charts: bool,
    prefixes: tuple[str, ...],
    version: str | None = None,
) -> None:
    for entry in sorted(details.values(), key=lambda e: str(e["name"])):
        name, chart_name = str(entry["name"]), entry.get("chartName")
        if not isinstance(chart_name, str) or parse_archive_name(chart_name) is None:
            walk.add("details", "skip", f"{name}: chartName {shown(chart_name, 60)} is not <name>-<version>.tgz")
            continue
        if not charts:
            walk.apps[name] = str(entry["version"])
            continue
        # what a box sends (beclab/market): the chart's own version, not its Olares version
        query = f"?fileName={chart_name}&version={entry['version']}"
        status, kind, data, used = 404, "", b"", ""
        for prefix in prefixes:  # 1.12.7 asks under /api/v2/ first and falls back to /api/v1/ on a 404
            used = f"{prefix}/applications/{name}/chart{query}"
            status, kind, data = get(fetch, walk, "GET", used)
            if status != 404:
                break
        call = f"GET {used}"
        if status != 200:
            walk.add(call, "skip", f"HTTP {status}: the box cannot install {name}")
            continue
        problem, manifest = chart_archive(data, name)
        if problem:
            walk.add(call, "skip", f"{problem}: the box cannot install {name}")
            continue
        dependency = olares_dependency(manifest)
        if dependency and satisfies(walk.olares, dependency) is False:
            walk.add(
                call,
                "skip",
                f"the archive's OlaresManifest.yaml needs Olares {shown(dependency, 40)}: a "
                f"{walk.olares} box refuses to install {name} (a market of olarespack gives such boxes their "
                "charts at <URL>/legacy)",
            )
            continue
        walk.add(call, "take", f"{chart_name} ({len(data) // 1024} KiB{', ' + shown(kind, 40) if kind else ''})")
        walk.apps[name] = str(entry["version"])
