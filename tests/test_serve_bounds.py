"""What `olarespack serve` reads from its folder and how it ends a connection, against a real server on
127.0.0.1 (a subprocess, real sockets): a published archive or icon swapped for a link after the start
(or a folder on the way to it), a named pipe where an archive was, and requests whose body framing is
ambiguous or broken followed by a pipelined request that must not be answered (RFC 9112 section 6.1).

The markets are built without helm: the catalog of the committed apps, and stand-in archive bytes under
the names the catalog gives (the server sends archives as bytes; it never opens them)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import APP_FILES
from olarespack.core.errors import CatalogError
from olarespack.market import catalog as market
from olarespack.market.state import load_state
from olarespack.package import write_digests
from olarespack.project import render_apps
from test_serve import request as fetch
from test_serve import wait_for
from test_serve_hardening import (
    DETAILS,
    closed_by_server,
    connect,
    guarded_server,
    quick_get,
    read_until_closed,
    write_market,
)

SECRET = b"secret outside the market"
ICON = "app.png"


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    apps = {
        gen: [
            market.MarketApp(a.file, a.spec, a.chart, "0" * 64, a.spec.metadata.icon)
            for a in render_apps(APP_FILES, [gen])
        ]
        for gen in market.GENERATION_NAMES
    }
    return market.build_catalog(apps)


def archive_bytes(file_name: str) -> bytes:
    return f"archive {file_name}".encode()


@pytest.fixture
def folder(catalog: dict[str, Any], tmp_path: Path) -> Path:
    """A market with an archive for every chart the catalog names and one icon, and a secret beside it."""
    market_dir = write_market(tmp_path / "market", catalog)
    for gen, generation in catalog["generations"].items():
        for file_name in generation["charts"].values():
            path = market_dir / market.CHARTS_DIR / gen / file_name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive_bytes(file_name))
    (market_dir / market.ICONS_DIR).mkdir()
    (market_dir / market.ICONS_DIR / ICON).write_bytes(b"\x89PNG icon")
    write_digests(market_dir / market.CHARTS_DIR)  # as publish lists what it wrote
    (tmp_path / "secret.tgz").write_bytes(SECRET)
    return market_dir


@pytest.fixture
def served(folder: Path) -> Iterator[tuple[str, Path]]:
    with guarded_server(folder, folder.parent / "serve.log", request_seconds=5) as base:
        yield base, folder


def first_chart(catalog: dict[str, Any]) -> tuple[str, str]:
    name, file_name = next(iter(catalog["generations"]["current"]["charts"].items()))
    return name, file_name


def chart_target(name: str, file_name: str) -> str:
    return f"/api/v1/applications/{name}/chart?fileName={file_name}"


def swap_for_link(path: Path, target: Path) -> None:
    """Replace `path` by a link to `target` in one rename, as an attacker with write access would."""
    link = path.with_name(path.name + ".link")
    link.symlink_to(target)
    os.replace(link, path)


def assert_not_served(base: str, target: str) -> None:
    status, _, body = fetch(base, "GET", target)
    assert status == 404 and SECRET not in body, (status, body[:80])


# --------------------------------------------------------------------------- files: links and pipes


def test_an_archive_swapped_for_a_link_after_the_start_is_not_served(
    served: tuple[str, Path], catalog: dict[str, Any]
) -> None:
    base, folder = served
    name, file_name = first_chart(catalog)
    status, _, body = fetch(base, "GET", chart_target(name, file_name))
    assert (status, body) == (200, archive_bytes(file_name))
    swap_for_link(folder / market.CHARTS_DIR / "current" / file_name, folder.parent / "secret.tgz")
    assert_not_served(base, chart_target(name, file_name))  # main answered 200 with the secret


def test_an_icon_swapped_for_a_link_is_not_served(served: tuple[str, Path]) -> None:
    base, folder = served
    assert fetch(base, "GET", f"/icons/{ICON}")[0] == 200
    swap_for_link(folder / market.ICONS_DIR / ICON, folder.parent / "secret.tgz")
    assert_not_served(base, f"/icons/{ICON}")


def test_a_folder_swapped_for_a_link_is_not_followed(served: tuple[str, Path], catalog: dict[str, Any]) -> None:
    """charts/current replaced by a link to a folder elsewhere holding a file of the same name."""
    base, folder = served
    name, file_name = first_chart(catalog)
    elsewhere = folder.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / file_name).write_bytes(SECRET)
    current = folder / market.CHARTS_DIR / "current"
    current.rename(folder.parent / "moved-away")
    current.symlink_to(elsewhere, target_is_directory=True)
    assert_not_served(base, chart_target(name, file_name))
    # and the icons folder as a link: the same
    (folder / market.ICONS_DIR).rename(folder.parent / "icons-away")
    (elsewhere / ICON).write_bytes(SECRET)
    (folder / market.ICONS_DIR).symlink_to(elsewhere, target_is_directory=True)
    assert_not_served(base, f"/icons/{ICON}")


def test_a_named_pipe_is_refused_without_waiting(served: tuple[str, Path], catalog: dict[str, Any]) -> None:
    base, folder = served
    name, file_name = first_chart(catalog)
    path = folder / market.CHARTS_DIR / "current" / file_name
    path.unlink()
    os.mkfifo(path)
    started = time.monotonic()
    assert_not_served(base, chart_target(name, file_name))  # main waited for a writer: the client timed out
    assert time.monotonic() - started < 5
    status, _, _ = fetch(base, "GET", "/health")
    assert status == 200


def test_links_are_not_indexed_even_inside_the_market(folder: Path, catalog: dict[str, Any]) -> None:
    """A link is never served, wherever it points: one to another file of the market, one to a file outside,
    and a generation folder that is a link to the other generation's."""
    name, file_name = first_chart(catalog)
    icons = folder / market.ICONS_DIR
    (icons / "inside.png").symlink_to(icons / ICON)
    (icons / "outside.png").symlink_to(folder.parent / "secret.tgz")
    legacy = folder / market.CHARTS_DIR / "legacy"
    legacy.rename(folder.parent / "legacy-away")
    legacy.symlink_to(folder / market.CHARTS_DIR / "current", target_is_directory=True)
    state = load_state(folder)
    assert sorted(state.icons) == [ICON]
    assert state.generations["legacy"].charts == {}
    assert state.generations["current"].charts[file_name] == (name, folder.resolve() / "charts" / "current" / file_name)


# --------------------------------------------------------------------------- framing errors close the connection


def pipelined(marker: str) -> bytes:
    return f"GET /health?pipelined={marker} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


@pytest.fixture(scope="module")
def framing_server(catalog: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("framing")
    # the default 10 s request deadline: a connection left open would be seen well before it cuts it
    with guarded_server(write_market(root / "market", catalog), root / "serve.log", max_connections=50) as base:
        yield base, root / "serve.log"


@pytest.mark.parametrize(
    ("head", "status"),
    [
        # both framings: h11 takes the chunked one; RFC 9112 6.1 says close after answering
        (
            f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 18\r\n\r\n"
            '12\r\n{"app_ids": ["a"]}\r\n0\r\n\r\n',
            400,
        ),
        (
            f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nContent-Length: 18\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        # a chunk size that is not hex
        (f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        # two different lengths
        (f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}", 400),
        # a length over the bound, refused before its body is read: what follows is no request
        (f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{{}}", 413),
    ],
    ids=["chunked-and-length", "length-and-chunked", "bad-chunk-size", "two-lengths", "length-over-the-bound"],
)
def test_a_framing_error_closes_the_connection(
    framing_server: tuple[str, Path], head: str, status: int, request: pytest.FixtureRequest
) -> None:
    base, log = framing_server
    marker = request.node.callspec.id
    sock = connect(base)
    sock.sendall(head.encode() + pipelined(marker))
    answer, after = read_until_closed(sock, 5)
    sock.close()
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    assert after is not None, "the connection stayed open after the error answer"
    assert answer.count(b"HTTP/1.1 ") == 1, "the pipelined request was answered"
    time.sleep(0.2)  # a pipelined answer would be logged by now
    assert f"pipelined={marker}" not in log.read_text()


def test_a_good_request_keeps_the_pipeline(framing_server: tuple[str, Path]) -> None:
    """The control: the same pipelined pair with a well-framed body is answered twice on one connection."""
    base, _ = framing_server
    sock = connect(base)
    body = b'{"app_ids": ["a"]}'
    sock.sendall(
        f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
        + pipelined("control").replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    )
    answer, after = read_until_closed(sock, 5)
    sock.close()
    assert answer.count(b"HTTP/1.1 200 ") == 2 and after is not None, answer[:300]


def test_a_hard_link_to_a_file_elsewhere_is_never_served(served: tuple[str, Path], catalog: dict[str, Any]) -> None:
    """A hard link is no symbolic link: the walk without links reaches it. Only the bytes the market's digest
    list gives are served, and an icon with no list (a market from before icons/SHA256SUMS) has one link."""
    base, folder = served
    name, file_name = first_chart(catalog)
    chart = folder / market.CHARTS_DIR / "current" / file_name
    chart.unlink()
    os.link(folder.parent / "secret.tgz", chart)
    icon = folder / market.ICONS_DIR / ICON
    icon.unlink()
    os.link(folder.parent / "secret.tgz", icon)
    assert_not_served(base, chart_target(name, file_name))  # main answered 200 with the secret
    assert_not_served(base, f"/icons/{ICON}")


def test_only_what_the_markets_lists_name_is_indexed(folder: Path, catalog: dict[str, Any]) -> None:
    name, file_name = first_chart(catalog)
    extra = f"{name}-9.9.9.tgz"
    (folder / market.CHARTS_DIR / "current" / extra).write_bytes(SECRET)  # put there by hand, listed nowhere
    (folder / market.ICONS_DIR / "other.png").write_bytes(SECRET)
    write_digests(folder / market.ICONS_DIR, "*.png")  # the icons list, as publish writes it now
    (folder / market.ICONS_DIR / "late.png").write_bytes(SECRET)
    state = load_state(folder)
    assert extra not in state.generations["current"].charts and file_name in state.generations["current"].charts
    assert sorted(state.icons) == sorted([ICON, "other.png"])
    (folder / market.CHARTS_DIR / market.DIGESTS_FILE).write_text("not a digest line\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="publish the market again"):
        load_state(folder)


# --------------------------------------------------------------------------- clients that do not read (#35 items 4, 5)

BIG_ICON = "big.png"


def with_big_icon(folder: Path) -> Path:
    """The market with a 4 MB icon, listed as publish lists icons: an answer no socket buffer holds."""
    (folder / market.ICONS_DIR / BIG_ICON).write_bytes(b"\x89PNG" + bytes(4 << 20))
    write_digests(folder / market.ICONS_DIR, "*.png")
    return folder


def asking_without_reading(base: str, target: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    host, port = base.removeprefix("http://").split(":")
    sock.connect((host, int(port)))
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def test_a_client_that_does_not_read_its_answer_is_cut_at_the_answer_deadline(folder: Path) -> None:
    with guarded_server(with_big_icon(folder), folder.parent / "serve.log", response_seconds=1.5) as base:
        sock = asking_without_reading(base, f"/icons/{BIG_ICON}")
        time.sleep(3)  # it reads nothing for twice the deadline
        data, after = read_until_closed(sock, 10)
        sock.close()
        assert after is not None and len(data) < 4 << 20  # cut: the rest of the answer was never sent
    log = (folder.parent / "serve.log").read_text()
    assert "answer not taken after 1.5s" in log and "Traceback" not in log


def test_clients_that_do_not_read_do_not_keep_others_out(folder: Path) -> None:
    with guarded_server(
        with_big_icon(folder), folder.parent / "serve.log", max_connections=3, response_seconds=60
    ) as base:
        held = [asking_without_reading(base, f"/icons/{BIG_ICON}") for _ in range(3)]
        time.sleep(1.5)  # each answer stalls past STALL_SECONDS
        status, body = quick_get(base, "/health")
        assert status == 200 and b'"ok"' in body  # main answered 503 for as long as they held on (63 s)
        assert wait_for(lambda: any(map(closed_by_server, held)))
        for sock in held:
            sock.close()
    assert "does not read its answer" in (folder.parent / "serve.log").read_text()


def test_one_connection_serves_at_most_max_requests_then_says_it_closes(folder: Path) -> None:
    with guarded_server(folder, folder.parent / "serve.log", max_requests=5) as base:
        sock = connect(base)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 20)  # pipelined, more than it may serve
        data, after = read_until_closed(sock, 10)
        sock.close()
    answers = data.split(b"HTTP/1.1 ")[1:]
    assert after is not None and len(answers) == 5 and all(a.startswith(b"200 ") for a in answers)
    assert b"connection: close" in answers[-1].lower() and b"connection: close" not in answers[0].lower()


def test_a_failing_accept_is_one_line_a_second(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import errno
    import logging

    from olarespack.market.connections import AcceptErrors

    loop = asyncio.new_event_loop()
    try:
        handler = AcceptErrors()
        error = OSError(errno.EMFILE, "Too many open files")
        with caplog.at_level(logging.WARNING, logger="olarespack.serve"):
            for _ in range(2048):  # one tick of asyncio's accept loop over its backlog
                handler(loop, {"message": "socket.accept() out of system resource", "exception": error})
        lines = [r for r in caplog.records if r.name == "olarespack.serve"]
        assert len(lines) == 1 and "Too many open files" in lines[0].getMessage() and not lines[0].exc_info
    finally:
        loop.close()


def test_closing_sockets_count_against_the_cap_and_are_cut_first() -> None:
    """The pool with stand-in connections (the real server's eviction is tested above): a socket lingering
    after its last answer is counted, and a new connection over the cap cuts it before an idle one."""
    from olarespack.market.connections import ConnectionLimits
    from olarespack.market.protocol import _Pool

    cut: list[str] = []

    class Conn:
        def __init__(self, name: str) -> None:
            self.name = name

        def evict(self) -> None:
            cut.append(self.name)
            pool.gone(self)  # type: ignore[arg-type]

    pool = _Pool(ConnectionLimits(max_connections=2))
    idle, closing = Conn("idle"), Conn("closing")
    for conn in (idle, closing):
        assert pool.admit(conn)  # type: ignore[arg-type]
    pool.evictable[idle] = None  # type: ignore[index]
    pool.lingering[closing] = None  # type: ignore[index]
    assert pool.admit(Conn("new")) and cut == ["closing"]  # type: ignore[arg-type]
    assert len(pool.live) == 2


def test_archives_without_the_markets_digest_list_are_refused_saying_why(folder: Path) -> None:
    (folder / market.CHARTS_DIR / market.DIGESTS_FILE).unlink()
    with pytest.raises(CatalogError, match=r"no charts/SHA256SUMS beside the archives: publish the market again"):
        load_state(folder)
