"""Fetch one release's wheel from PyPI once and keep only its Python sources (plus the wheel's sha256).

The engine wheels are hundreds of megabytes of compiled kernels; the facts we read live in a few hundred
kilobytes of `.py` files, so the cache holds `<name>-<version>.sources.zip` (the wheel's `.py` members under
their wheel paths) and `<name>-<version>.artifact.json` (file name, sha256, size, version) and drops the wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

_VERSION = re.compile(r"^\d+(\.\d+){1,3}([.-]?post\d+)?$")
MAX_SOURCE_BYTES = 16 << 20  # one .py of the wheel (vLLM's longest: about 300 KB)
MAX_SOURCES_BYTES = 512 << 20  # all of them (about 40 MB)


class FetchError(Exception):
    """A release could not be fetched or read; the message says which and what to do."""


@dataclass(frozen=True)
class Artifact:
    file: str
    sha256: str
    size: int
    version: str


def _pip(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False)


def available_versions(package: str) -> list[str]:
    """Every version PyPI lists for `package`, newest first (pip's own order)."""
    done = _pip(["index", "versions", package, "--disable-pip-version-check"])
    for line in done.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise FetchError(f"pip index versions {package} listed no versions: {done.stderr.strip()[-400:]}")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def newest_per_minor(versions: list[str]) -> dict[str, str]:
    """'0.33' -> newest final release of that minor; pre-releases (rc, dev) are skipped."""
    best: dict[str, str] = {}
    for version in versions:
        if not _VERSION.match(version):
            continue
        minor = ".".join(version.split(".")[:2])
        if minor not in best or _key(version) > _key(best[minor]):
            best[minor] = version
    return best


def _paths(cache: Path, package: str, version: str) -> tuple[Path, Path]:
    return cache / f"{package}-{version}.sources.zip", cache / f"{package}-{version}.artifact.json"


def cached(cache: Path, package: str, version: str) -> tuple[Path, Artifact] | None:
    sources, meta = _paths(cache, package, version)
    if not (sources.is_file() and meta.is_file()):
        return None
    return sources, Artifact(**json.loads(meta.read_text()))


def slim_wheel(wheel: Path, cache: Path, package: str, version: str) -> tuple[Path, Artifact]:
    """Copy the wheel's `.py` members into the cache's sources zip and record the wheel's identity."""
    digest = hashlib.sha256()
    with wheel.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    artifact = Artifact(wheel.name, digest.hexdigest(), wheel.stat().st_size, version)
    sources, meta = _paths(cache, package, version)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache, suffix=".part", delete=False) as part:
        part_path = Path(part.name)
    try:
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(part_path, "w", zipfile.ZIP_DEFLATED) as dst:
            kept = 0
            for info in src.infolist():
                if info.filename.endswith(".py") and not info.is_dir():
                    kept += info.file_size
                    if info.file_size > MAX_SOURCE_BYTES or kept > MAX_SOURCES_BYTES:  # a zip bomb, not vLLM
                        raise FetchError(
                            f"{wheel.name}: {info.filename} unpacks past {MAX_SOURCE_BYTES >> 20} MiB "
                            f"(or the sources past {MAX_SOURCES_BYTES >> 20} MiB): not a vLLM wheel"
                        )
                    with src.open(info) as member:
                        dst.writestr(info.filename, member.read(MAX_SOURCE_BYTES + 1))
        os.replace(part_path, sources)
    finally:
        part_path.unlink(missing_ok=True)
    meta.write_text(json.dumps(asdict(artifact), indent=1, sort_keys=True) + "\n")
    return sources, artifact


def fetch(package: str, version: str, cache: Path) -> tuple[Path, Artifact]:
    """The sources zip and artifact of `package==version`, downloading the wheel only when not cached."""
    hit = cached(cache, package, version)
    if hit:
        return hit
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="download-") as tmp:
        done = _pip(
            [
                "download",
                f"{package}=={version}",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--disable-pip-version-check",
                "-d",
                tmp,
            ]
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            said = [line for line in done.stderr.splitlines() if line.startswith("ERROR: No matching")]
            reason = said[-1] if said else done.stderr.strip()[-300:]
            raise FetchError(
                f"pip download {package}=={version} failed: {reason} "
                f"(`pip index versions {package}` lists the releases)"
            )
        return slim_wheel(wheels[0], cache, package, version)
