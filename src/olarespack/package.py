"""Byte-reproducible chart archives and their digest list.

A RenderedChart is written to a scratch folder with fixed modes and mtimes (the release date), then
packaged with Helm 4: it keeps file mtimes and writes a zero gzip time, so the same chart gives the same
bytes on every run. Helm 3.19 stamps the current time instead; every archive is checked (gzip header
time, tar member times, top folder) so a packager that breaks reproducibility is caught, not shipped.

This module knows archives only: the market folder they are published into is market/folder.py's.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import struct
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from olarespack.core.errors import PackageError
from olarespack.helm import Helm
from olarespack.olares.generations import archive_name
from olarespack.write import write_file, write_files

DIR_MODE = 0o755


@dataclass(frozen=True)
class Archive:
    file_name: str  # <chart>-<version>.tgz
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def materialize(chart: Mapping[str, str], folder: Path, mtime: int) -> None:
    """Write a chart folder whose bytes, modes and times depend on the chart and `mtime` only."""
    write_files(chart, folder)
    for item in sorted(folder.rglob("*"), reverse=True):
        if item.is_dir():
            os.chmod(item, DIR_MODE)
        os.utime(item, (mtime, mtime), follow_symlinks=False)
    os.chmod(folder, DIR_MODE)
    os.utime(folder, (mtime, mtime))


def package_chart(chart: Mapping[str, str], name: str, version: str, helm: Helm, mtime: int) -> Archive:
    """Package one chart with `helm` (use helm4) and check that the archive is reproducible."""
    with tempfile.TemporaryDirectory(prefix="olarespack-package-") as tmp:
        source, out = Path(tmp) / "src" / name, Path(tmp) / "out"
        materialize(chart, source, mtime)
        out.mkdir()
        result = helm.package(source, out)
        produced = out / archive_name(name, version)
        if not result.ok or not produced.is_file():
            detail = (result.stderr or result.stdout).strip() or f"no {produced.name} was written"
            raise PackageError(f"{name} {version}: helm {helm.version} package failed: {detail}")
        archive = Archive(produced.name, produced.read_bytes())
    check_archive(archive, name, mtime, helm.version)
    return archive


def check_archive(archive: Archive, name: str, mtime: int, packager: str) -> None:
    """Refuse an archive whose bytes would change from run to run, or that a box could not unpack."""
    data = archive.data
    if data[:2] != b"\x1f\x8b":
        raise PackageError(f"{archive.file_name}: not a gzip file")
    (gzip_time,) = struct.unpack("<I", data[4:8])
    if gzip_time != 0:
        raise PackageError(
            f"{archive.file_name}: helm {packager} stamped gzip time {gzip_time}; the archive "
            "would differ on every run (package with helm4, which writes 0)"
        )
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        members = tar.getmembers()
    for member in members:
        if member.name.split("/", 1)[0] != name:
            raise PackageError(f"{archive.file_name}: {member.name} is outside the top folder {name}/")
        if member.mtime != mtime:
            raise PackageError(
                f"{archive.file_name}: helm {packager} stamped {member.name} with time "
                f"{member.mtime} instead of {mtime}; package with helm4, which keeps file times"
            )


# --------------------------------------------------------------------------- files


def digest_list(archives: Iterable[Path], root: Path) -> bytes:
    """`sha256sum -c` input for the archives, paths relative to `root`, sorted."""
    lines = [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}\n"
        for p in sorted(archives, key=lambda p: p.relative_to(root).as_posix())
    ]
    return "".join(lines).encode("utf-8")


def write_digests(folder: Path, pattern: str = "*.tgz") -> Path:
    """Write folder/SHA256SUMS over every file below it that `pattern` matches (old versions included)."""
    target = folder / "SHA256SUMS"
    files = [p for p in folder.rglob(pattern) if p.is_file() and not p.is_symlink() and p != target]
    write_file(target, digest_list(files, folder))
    return target
