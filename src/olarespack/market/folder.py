"""The market folder on disk, written whole: a market is assembled in a hidden sibling folder (what is
published carried over by hard links) and swapped in at once, so a reader (the server, a static host's
sync) sees the old market or the new one, and a killed publish leaves the old one intact.

The layout is catalog.py's (its module docstring); the archives are package.py's reproducible ones."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from olarespack.market import catalog as market
from olarespack.market import v1, v2
from olarespack.olares.generations import GenerationName
from olarespack.package import Archive, write_digests
from olarespack.write import Status, is_leftover, staging_folder, swap_in, write_file


def _carry_over(source: Path, target: Path) -> None:
    """Everything already published, into the staging folder: hard links (no copy, no extra disk), or copies
    where links are not possible. A linked file is never written in place: write_file replaces by rename."""
    for path in sorted(source.rglob("*")):
        if path.is_symlink() or is_leftover(path):
            continue
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, destination)
            except OSError:
                shutil.copy2(path, destination)


def write_market(
    market_dir: Path,
    archives: dict[GenerationName, dict[str, Archive]],
    icons: dict[str, bytes],
    catalog: dict[str, Any],
    verify: Callable[[Path], object],
    extra: dict[str, bytes] | None = None,
) -> dict[tuple[str, str], Status]:
    """The whole market (published archives, new archives and icons, static answers, digests, `extra` files,
    catalog.json) assembled in a sibling folder, checked with `verify` (the server's own loader), then
    swapped in at once: a kill at any moment leaves the previous market whole, and readers never see a mix."""
    staging = staging_folder(market_dir)
    try:
        if market_dir.is_dir():
            _carry_over(market_dir, staging)
        written: dict[tuple[str, str], Status] = {}
        for gen, by_app in archives.items():
            for name, archive in by_app.items():
                written[gen, name] = write_file(staging / market.CHARTS_DIR / gen / archive.file_name, archive.data)
        for file_name, data in icons.items():
            write_file(staging / market.ICONS_DIR / file_name, data)
        for path, data in (v1.static_files(catalog) | v2.static_files(catalog)).items():
            write_file(staging / path, data)
        write_digests(staging / market.CHARTS_DIR)
        if (staging / market.ICONS_DIR).is_dir():  # serve gives out only the icons listed, as it lists them
            write_digests(staging / market.ICONS_DIR, "*")
        for path, data in (extra or {}).items():
            write_file(staging / path, data)
        written["catalog", ""] = write_file(staging / market.CATALOG_FILE, market.catalog_bytes(catalog))
        verify(staging)
        swap_in(staging, market_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written
