"""The market folder as `olarespack serve` holds it in memory, and the check that a folder can be served.

load_state() reads catalog.json and indexes the archives and icons into a MarketState: every answer
precomputed (v1.VersionedAnswer for the GET answers, serialized detail entries), and only regular
files inside the market folder. It is pure and raises CatalogError for anything unusable, so the server runs
it at start and on every catalog change, and publish can run it on the market it has just written
(import it from here: this module does not import the HTTP stack).

Store holds the state in service. When catalog.json changes it builds the new state aside and swaps it
in with one assignment; when the new file cannot be loaded it keeps the previous state and records why
in `error` (what /health reports as stale), until a loadable catalog appears.

read_inside() is how a request reads an indexed file: the folder can change under a running server (a file
or a folder swapped for a link, a named pipe), so each read walks from the market folder without following
a link at any step and sends only a regular file; anything else is an OSError, answered as not found.
Only what the market's own digest lists name is indexed (charts/SHA256SUMS, icons/SHA256SUMS), and read_listed()
sends a file only when its bytes are the ones listed: a hard link inside the folder to a file elsewhere, or a
file put there by hand, is never given out. (An icons folder from before icons/SHA256SUMS: its icons with one
link only.)
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import anyio

from olarespack.core.errors import CatalogError, MissingCatalogError
from olarespack.market import catalog as market
from olarespack.market import v1, v2
from olarespack.olares.generations import GENERATION_NAMES, GenerationName, parse_archive_name

log = logging.getLogger("olarespack.serve")

_ICON_RE: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\.(png|jpe?g|webp|svg|gif|ico)$")


@dataclass(frozen=True)
class GenerationView:
    hash_answer: v1.VersionedAnswer
    info_answer: v1.VersionedAnswer
    default_version: str
    details: dict[str, bytes]  # app id -> its entry, serialized
    charts: dict[str, tuple[str, Path]]  # archive file name -> (app name, file under the market folder)
    latest: dict[str, str]  # app name -> file name of its current archive
    hash: str
    apps: int
    v2: v2.Answers


@dataclass(frozen=True)
class MarketState:
    root: Path  # the market folder (resolved once): every indexed file is read from it with read_listed()
    generations: dict[str, GenerationView]
    icons: dict[str, Path]
    stamp: tuple[int, int, int]
    digests: dict[Path, str] = field(default_factory=dict)  # indexed file -> the sha256 its list gives
    source: v2.SourceIdentity = v2.DEFAULT_SOURCE


MAX_DIGEST_LIST = 4 << 20  # 64-hex digest, two spaces, a path: tens of thousands of files
_DIGEST_LINE: Final = re.compile(r"^([0-9a-f]{64})  ([A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)?)$")


_NOFOLLOW: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a named pipe for reading waits for a writer; with it the open returns and fstat refuses it
_FILE_FLAGS: Final = _NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY


def _open_folder(root: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of root/parts..., each step opened relative to the last without following a link
    (O_NOFOLLOW | O_DIRECTORY: a link or a non-folder at any step is an OSError). The root itself is the
    folder the user named, links and all."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            inner = os.open(part, _NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_inside(root: Path, path: Path, single_link: bool = False) -> bytes:
    """The bytes of `path`, a file under `root`, when it is a regular file reached without following any
    link (and, with `single_link`, with no other hard link); OSError otherwise (a link, a pipe, a device, a
    folder, a file that is gone)."""
    *folders, name = path.relative_to(root).parts
    folder = _open_folder(root, tuple(folders))
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if single_link and info.st_nlink != 1:
            raise OSError(errno.EINVAL, "a file with another hard link")
        return handle.read(info.st_size)  # the size when opened: a file growing meanwhile is not followed


def read_listed(state: MarketState, path: Path) -> bytes:
    """An indexed file's bytes when they are the ones its digest list gives (read_inside's checks first);
    OSError otherwise, answered as not found."""
    expected = state.digests.get(path)
    data = read_inside(state.root, path, single_link=expected is None)
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise OSError(errno.EINVAL, "not the file the market lists")
    return data


def digest_list(root: Path, folder: str) -> dict[str, str] | None:
    """root/folder/SHA256SUMS as {path under folder: sha256}; None when there is none. CatalogError: malformed."""
    path = root / folder / market.DIGESTS_FILE
    try:
        raw = read_inside(root, path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CatalogError(path, f"unreadable digest list: {exc.strerror or type(exc).__name__}") from None
    if len(raw) > MAX_DIGEST_LIST:
        raise CatalogError(path, f"a digest list over {MAX_DIGEST_LIST >> 20} MiB")
    listed: dict[str, str] = {}
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        found = _DIGEST_LINE.match(line)
        if found is None:
            raise CatalogError(path, f"line {number} is not `<sha256>  <file>`: publish the market again")
        listed[found.group(2)] = found.group(1)
    return listed


def _files(root: Path, folder: tuple[str, ...], accept: Callable[[str], object]) -> dict[str, Path]:
    """Regular files (not links) in root/folder whose name matches, the folder reached without links."""
    try:
        fd = _open_folder(root, folder)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link where a folder should be: nothing in it is served
            return {}
        raise
    found: dict[str, Path] = {}
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if accept(entry.name) and entry.is_file(follow_symlinks=False):
                    found[entry.name] = root.joinpath(*folder, entry.name)
    finally:
        os.close(fd)
    return dict(sorted(found.items()))


def _stamp(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size, info.st_ino


def load_state(market_dir: Path) -> MarketState:
    """Read catalog.json and index the archives and icons: everything a request needs, precomputed.

    Pure (reads, never writes) and the only judge of whether a market folder can be served: `serve` runs
    it at start and on every catalog change, and publish can run it on what it wrote. Raises
    MissingCatalogError when there is no catalog.json, CatalogError for anything else that is wrong."""
    root = market_dir.resolve()
    path = root / market.CATALOG_FILE
    try:
        stamp = _stamp(path)
        catalog = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise MissingCatalogError(
            path, "no catalog", f"run `olarespack publish --market-dir {market_dir}` first"
        ) from None
    except OSError as exc:  # strerror: the message without the path, which /health must not show
        raise CatalogError(path, f"unreadable catalog: {exc.strerror or type(exc).__name__}") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep to decode
        raise CatalogError(path, f"unreadable catalog: {exc}") from None
    if not isinstance(catalog, dict) or catalog.get("format") != market.FORMAT:
        raise CatalogError(path, f"not an olarespack catalog (format {market.FORMAT})")
    listed = digest_list(root, market.CHARTS_DIR)
    if listed is None:  # every publish writes it: archives without it are no market's, and none would be served
        if any(_files(root, (market.CHARTS_DIR, name), parse_archive_name) for name in GENERATION_NAMES):
            raise CatalogError(
                path, f"no {market.CHARTS_DIR}/{market.DIGESTS_FILE} beside the archives: publish the market again"
            )
        listed = {}
    try:
        source = v2.SourceIdentity.of(catalog.get("source"))
        unknown = sorted(set(catalog["generations"]) - set(GENERATION_NAMES))
        if unknown or not catalog["generations"]:
            raise CatalogError(
                path,
                f"malformed catalog (generations {sorted(catalog['generations'])}; expected "
                f"some of {list(GENERATION_NAMES)})",
            )
        views = {name: _view(root, name, gen, listed, source) for name, gen in catalog["generations"].items()}
    except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        raise CatalogError(path, f"malformed catalog ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        raise CatalogError(path, f"cannot index the market folder: {exc.strerror or type(exc).__name__}") from None
    try:
        icons = _files(root, (market.ICONS_DIR,), _ICON_RE.match)
    except OSError as exc:
        raise CatalogError(path, f"cannot index the market folder: {exc.strerror or type(exc).__name__}") from None
    icon_digests = digest_list(root, market.ICONS_DIR)
    if icon_digests is not None:
        icons = {name: file for name, file in icons.items() if name in icon_digests}
    digests = {
        file: listed[f"{name}/{archive}"] for name, view in views.items() for archive, (_, file) in view.charts.items()
    }
    digests |= {file: icon_digests[name] for name, file in icons.items() if icon_digests is not None}
    return MarketState(root, views, icons, stamp, digests, source)


def _view(
    root: Path, name: str, gen: dict[str, Any], listed: dict[str, str], source: v2.SourceIdentity
) -> GenerationView:
    """One generation's answers and the archives charts/SHA256SUMS lists for it (a file it does not list is
    not the market's: never served)."""
    charts = {
        file: (parsed[0], real)
        for file, real in _files(root, (market.CHARTS_DIR, name), parse_archive_name).items()
        if (parsed := parse_archive_name(file)) and f"{name}/{file}" in listed
    }
    return GenerationView(
        hash_answer=v1.hash_template(gen),
        info_answer=v1.info_template(gen),
        default_version=str(gen["olares_version"]),
        details={ident: market.served_json(entry) for ident, entry in gen["details"].items()},
        charts=charts,
        latest=dict(gen["charts"]),
        hash=str(gen["hash"]),
        apps=len(gen["apps"]),
        v2=v2.answers_of(gen, cast(GenerationName, name), source),
    )


class Store:
    """The state requests read, replaced whole when catalog.json changes; `error` says why the catalog on
    disk is not the one in service (None when it is)."""

    def __init__(self, market_dir: Path) -> None:
        self.market_dir = market_dir
        self.state = load_state(market_dir)
        self.error: str | None = None
        self._seen: tuple[int, int, int] | None = self.state.stamp  # the stamp last acted on

    def _disk_stamp(self) -> tuple[int, int, int] | None:
        try:
            return _stamp(self.market_dir / market.CATALOG_FILE)
        except OSError:
            return None

    def changed(self) -> bool:
        """Whether catalog.json is another file than the last one looked at (each is looked at once, so a
        bad file is reported once, not every poll)."""
        return self._disk_stamp() != self._seen

    def reload(self) -> None:
        self._seen = self._disk_stamp()
        try:
            state = load_state(self.market_dir)
        except CatalogError as exc:
            self.error = f"{market.CATALOG_FILE}: {exc.reason}"
            log.error("keeping the previous catalog: %s", exc)
            return
        self.state = state  # one reference swap: a request sees the old state or the new one
        self.error = None
        hashes = ", ".join(f"{g} {v.hash} ({v.apps} apps)" for g, v in state.generations.items())
        log.info("catalog loaded: %s", hashes)

    async def watch(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                if self.changed():
                    await anyio.to_thread.run_sync(self.reload)
            except Exception as exc:  # the watcher must outlive any one bad reload, and /health must tell
                self.error = f"{market.CATALOG_FILE}: reload failed ({type(exc).__name__})"
                log.exception("catalog reload failed; keeping the previous catalog")
