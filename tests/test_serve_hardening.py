"""What an attacker showed against `olarespack serve`, each as a real server on 127.0.0.1 (a subprocess,
real sockets, real uvicorn): catalog content that broke the answer assembly, a broken catalog that /health
did not report, connections that never finish their request locking everyone out, slow and idle
clients holding connections for ever, and client mistakes that logged tracebacks.

The markets here are built without helm (render_apps + build_catalog; no archives), so these tests run
without the helm binaries."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import APP_FILES
from olarespack.core.errors import CatalogError, MissingCatalogError
from olarespack.market import catalog as market
from olarespack.market import v1
from olarespack.market.state import load_state
from olarespack.project import render_apps
from test_serve import HOST, free_port, replace, request, running_server, stop, wait_for

SENTINEL = "\x00olarespack-version\x00"  # the marker the server used to split its answers on
AWKWARD = [SENTINEL, '"version":"1.12.6"', '\\u0000"}', "\u2028 tab\t", "ümlaut ✓"]
DETAILS = "/api/v1/applications/info"
# the server as the CLI runs it, but with the connection limits a test picks
GUARDED = """
import json, logging, sys
from pathlib import Path
from olarespack.market.serve import run
from olarespack.market.connections import ConnectionLimits
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
run(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), 0.1, ConnectionLimits(**json.loads(sys.argv[4])))
"""


# --------------------------------------------------------------------------- markets and servers


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


def write_market(folder: Path, catalog: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / market.CATALOG_FILE).write_bytes(market.catalog_bytes(catalog))
    return folder


def awkward(catalog: dict[str, Any], new_hash: str) -> dict[str, Any]:
    """The catalog with descriptions an attacker (or an unlucky author) could write, and another hash."""
    result: dict[str, Any] = json.loads(json.dumps(catalog))
    for generation in result["generations"].values():
        generation["hash"] = new_hash
        for text, ident in zip(AWKWARD, generation["apps"], strict=False):
            generation["apps"][ident]["description"] = text
            generation["details"][ident]["description"] = text
    return result


@contextmanager
def guarded_server(market_dir: Path, log: Path, **limits: Any) -> Iterator[str]:
    """The server with small connection limits, in a subprocess on a free loopback port."""
    port = free_port()
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", GUARDED, str(market_dir), HOST, str(port), json.dumps(limits)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    base = f"http://{HOST}:{port}"
    try:
        assert wait_for(lambda: _up(base) or proc.poll() is not None, 20) and proc.poll() is None, log.read_text()
        yield base
    finally:
        stop(proc)


def _up(base: str) -> bool:
    try:
        return request(base, "GET", "/health")[0] == 200
    except OSError:
        return False


def connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def read_until_closed(sock: socket.socket, seconds: float) -> tuple[bytes, float | None]:
    """Everything the server sends until it closes (and after how long), or (data, None) if it kept the
    connection open for `seconds`."""
    started = time.monotonic()
    data = b""
    sock.settimeout(seconds)
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, None
    except ConnectionResetError:
        pass
    return data, time.monotonic() - started


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has ended this connection: closed it, or answered (its answers here close)."""
    sock.setblocking(False)
    try:
        sock.recv(65536)
        return True
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.setblocking(True)


def quick_get(base: str, target: str) -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=3)  # "promptly": well inside any deadline
    try:
        conn.request("GET", target)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def log_text(path: Path, marker: str) -> str:
    assert wait_for(lambda: marker in path.read_text()), path.read_text()
    time.sleep(0.2)  # anything the same request would log after its access line
    return path.read_text()


# --------------------------------------------------------------------------- answers are assembled, not searched


def test_versioned_answers_equal_the_serialized_dicts(catalog: dict[str, Any]) -> None:
    for generation in awkward(catalog, "1" * 32)["generations"].values():
        for version in ("1.12.5", "1.12.6", "1.13.0-rc.1"):
            assert v1.hash_template(generation).render(version) == market.served_json(
                v1.hash_answer(generation, version)
            )
            assert v1.info_template(generation).render(version) == market.served_json(
                v1.info_answer(generation, version)
            )
    assert v1.VersionedAnswer.of({}).render("1.12.6") == b'{"version":"1.12.6"}'
    with pytest.raises(ValueError):
        v1.VersionedAnswer.of({"version": "x"})


def test_a_description_equal_to_the_sentinel_loads_and_serves(catalog: dict[str, Any], tmp_path: Path) -> None:
    bad = awkward(catalog, "feedface" * 4)
    market_dir = write_market(tmp_path / "market", bad)
    static = v1.static_files(bad)
    with running_server(market_dir, tmp_path / "serve.log") as base:  # main refused to start here
        for gen in market.GENERATION_NAMES:
            expected = bad["generations"][gen]
            # the static files are byte for byte the server's answers for the generation's version
            for api in ("v1", "v2"):
                for kind in ("hash", "info"):
                    status, _, body = request(base, "GET", f"/{gen}/api/{api}/appstore/{kind}")
                    assert status == 200 and body == static[f"static/{gen}/api/{api}/appstore/{kind}"]
            version = "1.12.4" if gen == "legacy" else "1.12.7"
            status, _, body = request(base, "GET", f"/api/v1/appstore/info?version={version}")
            info = json.loads(body)
            assert (status, info["version"], info["hash"]) == (200, version, "feedface" * 4)
            assert info["data"]["apps"] == expected["apps"]
            assert {a["description"] for a in info["data"]["apps"].values()} <= set(AWKWARD)
            ident = next(iter(expected["details"]))
            status, _, body = request(
                base, "POST", DETAILS, json.dumps({"app_ids": [ident], "version": version}).encode()
            )
            assert json.loads(body) == {
                "apps": {ident: expected["details"][ident]},
                "version": version,
                "not_found": [],
            }


def test_a_running_server_takes_a_sentinel_catalog(catalog: dict[str, Any], tmp_path: Path) -> None:
    market_dir = write_market(tmp_path / "market", catalog)
    with running_server(market_dir, tmp_path / "serve.log", "--poll-seconds", "0.1") as base:
        replace(market_dir / market.CATALOG_FILE, market.catalog_bytes(awkward(catalog, "feedface" * 4)))
        # main kept the old catalog for ever here, while /health said ok
        assert wait_for(lambda: json.loads(request(base, "GET", "/api/v1/appstore/hash")[2])["hash"] == "feedface" * 4)
        status, _, body = request(base, "GET", "/health")
        assert status == 200 and json.loads(body)["status"] == "ok"


# --------------------------------------------------------------------------- a stale catalog is reported


def test_a_broken_catalog_makes_health_stale_until_a_good_one_appears(catalog: dict[str, Any], tmp_path: Path) -> None:
    market_dir = write_market(tmp_path / "market", catalog)
    catalog_file = market_dir / market.CATALOG_FILE
    served = {g: v["hash"] for g, v in catalog["generations"].items()}
    with running_server(market_dir, tmp_path / "serve.log", "--poll-seconds", "0.1") as base:
        for broken in (
            b"{ half a catal",
            b"[" * 100_000,
            market.catalog_bytes({"format": market.FORMAT, "generations": {"x": {}}}),
        ):
            replace(catalog_file, broken)
            assert wait_for(lambda: request(base, "GET", "/health")[0] == 503)
            status, headers, body = request(base, "GET", "/health")
            health = json.loads(body)
            assert (status, headers["content-type"], health["status"]) == (503, "application/json", "stale")
            assert health["error"].startswith("catalog.json: ") and "\n" not in health["error"]
            assert "Traceback" not in health["error"] and str(tmp_path) not in health["error"]
            assert {g: v["hash"] for g, v in health["generations"].items()} == served
            # liveness stays 200 (a restart would not start on this catalog) but says stale too
            status, _, body = request(base, "GET", "/healthz")
            assert (status, json.loads(body)["status"]) == (200, "stale")
            # the previous catalog is still what boxes get
            assert json.loads(request(base, "GET", "/api/v1/appstore/hash")[2])["hash"] == served["current"]
            replace(catalog_file, market.catalog_bytes(catalog))  # a loadable catalog again: healthy again
            assert wait_for(lambda: request(base, "GET", "/health")[0] == 200)
            assert json.loads(request(base, "GET", "/health")[2])["status"] == "ok"
        catalog_file.unlink()  # publish never leaves the folder without one; a restart would fail now
        assert wait_for(lambda: request(base, "GET", "/health")[0] == 503)
        fresh = awkward(catalog, "0123456789abcdef" * 2)
        replace(catalog_file, market.catalog_bytes(fresh))
        assert wait_for(lambda: request(base, "GET", "/health")[0] == 200)
        health = json.loads(request(base, "GET", "/health")[2])
        assert health["status"] == "ok" and "error" not in health
        assert health["generations"]["current"]["hash"] == "0123456789abcdef" * 2
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_load_state_is_the_check_publish_can_run(catalog: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(MissingCatalogError):
        load_state(tmp_path / "nowhere")
    state = load_state(write_market(tmp_path / "good", catalog))
    assert {g: v.hash for g, v in state.generations.items()} == {
        g: v["hash"] for g, v in catalog["generations"].items()
    }
    broken = [
        b"",
        b"\xff\xfe",
        b"[" * 100_000,
        b"[]",
        b'{"format": "other"}',
        json.dumps({"format": market.FORMAT}).encode(),
        json.dumps({"format": market.FORMAT, "generations": {}}).encode(),
        json.dumps({"format": market.FORMAT, "generations": {"current": []}}).encode(),
        json.dumps({"format": market.FORMAT, "generations": {"x": catalog["generations"]["current"]}}).encode(),
    ]
    for number, data in enumerate(broken):
        folder = tmp_path / f"bad{number}"
        folder.mkdir()
        (folder / market.CATALOG_FILE).write_bytes(data)
        with pytest.raises(CatalogError) as caught:
            load_state(folder)
        assert "\n" not in caught.value.reason and str(folder.resolve()) in str(caught.value), data[:40]


# --------------------------------------------------------------------------- connections


def test_unfinished_heads_over_the_cap_do_not_lock_out_requests(catalog: dict[str, Any], tmp_path: Path) -> None:
    market_dir = write_market(tmp_path / "market", catalog)
    cap, flood = 8, 40
    # a long request deadline: here the cap's eviction, not the deadline, has to make room
    with guarded_server(market_dir, tmp_path / "serve.log", max_connections=cap, request_seconds=60) as base:
        held = []
        for _ in range(flood):
            sock = connect(base)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            held.append(sock)
        status, body = quick_get(base, "/api/v1/appstore/hash")
        assert status == 200 and json.loads(body)["hash"] == catalog["generations"]["current"]["hash"]
        status, body = quick_get(base, "/health")
        assert status == 200 and json.loads(body)["status"] == "ok"
        # the oldest were evicted to make room, the newest are still open
        assert wait_for(lambda: sum(map(closed_by_server, held)) >= flood - cap)
        closed = [closed_by_server(sock) for sock in held]
        assert closed == [True] * closed.count(True) + [False] * closed.count(False)
        assert closed.count(False) <= cap
        for sock in held:
            sock.close()
    log = (tmp_path / "serve.log").read_text()
    assert '"GET /api/v1/appstore/hash" 200' in log and "Traceback" not in log


def test_when_every_connection_is_busy_a_new_one_gets_503_at_once(catalog: dict[str, Any], tmp_path: Path) -> None:
    market_dir = write_market(tmp_path / "market", catalog)
    with guarded_server(market_dir, tmp_path / "serve.log", max_connections=3, request_seconds=2) as base:
        busy = []
        for number in range(3):  # requests in flight: the app is waiting for the rest of their bodies
            sock = connect(base)
            sock.sendall(f"POST {DETAILS}?slow={number} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{".encode())
            busy.append(sock)
        time.sleep(0.3)
        status, body = quick_get(base, "/health")
        assert status == 503 and b"busy" in body
        for sock in busy:  # the deadline ends them; then there is room again
            answer, after = read_until_closed(sock, 10)
            assert answer.startswith(b"HTTP/1.1 408 ") and after is not None
        assert quick_get(base, "/health")[0] == 200
    log = (tmp_path / "serve.log").read_text()
    for number in range(3):
        assert log.count(f'"POST {DETAILS}?slow={number}" 408') == 1
    assert "Traceback" not in log


@pytest.fixture(scope="module")
def short_limits(catalog: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server with a 1.5 s request deadline and a 1 s keep-alive."""
    root = tmp_path_factory.mktemp("short")
    with guarded_server(
        write_market(root / "market", catalog),
        root / "serve.log",
        max_connections=50,
        request_seconds=1.5,
        keep_alive_seconds=1,
    ) as base:
        yield base, root / "serve.log"


def test_a_trickling_client_is_cut_off_at_the_deadline(short_limits: tuple[str, Path]) -> None:
    base, log = short_limits
    sock = connect(base)
    head = b"GET /health?trickle=1 HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100 + b"\r\n\r\n"
    started, answer = time.monotonic(), b""
    sock.settimeout(0.25)
    try:
        for byte in head:  # one byte every 0.25 s: 30 s for the whole head
            sock.sendall(bytes([byte]))
            try:
                answer = sock.recv(65536)
                break
            except TimeoutError:
                continue
    except (BrokenPipeError, ConnectionResetError):
        pass
    elapsed = time.monotonic() - started
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert elapsed < 5  # the deadline is 1.5 s; without one the head would take 30 s
    assert "request not complete after 1.5s" in log_text(log, "408")


def test_a_client_that_sends_its_whole_body_first_still_reads_the_answer(short_limits: tuple[str, Path]) -> None:
    # a 413 to a declared body too big goes out before the body is read. After a plain close the body still
    # coming makes the kernel reset the connection, and a client that sends the whole body before it reads
    # (http.client, curl) fails on a broken pipe without the answer (RFC 9112 section 9.6): the server shuts
    # only its side and drops what still comes
    base, _ = short_limits
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", f"{DETAILS}?linger=1", body=b"{" + b" " * 5_000_000)
        answer = conn.getresponse()
        assert answer.status == 413 and b"at most" in answer.read()
    finally:
        conn.close()


def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(short_limits: tuple[str, Path]) -> None:
    base, _ = short_limits
    sock = connect(base)
    answer, after = read_until_closed(sock, 6)
    sock.close()
    assert answer == b"" and after is not None  # not a request: closed without an answer


def test_an_idle_keep_alive_connection_is_closed(short_limits: tuple[str, Path]) -> None:
    base, _ = short_limits
    sock = connect(base)
    sock.sendall(b"GET /health?keepalive=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    answer, after = read_until_closed(sock, 6)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"status":"ok"' in answer
    assert after is not None  # closed by the server after its 1 s keep-alive, not kept for ever


def test_a_kept_alive_connection_serves_several_requests(short_limits: tuple[str, Path]) -> None:
    base, _ = short_limits
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        for _ in range(5):
            conn.request("GET", "/api/v1/appstore/hash")
            answer = conn.getresponse()
            assert answer.status == 200 and answer.read()
            time.sleep(0.1)
    finally:
        conn.close()


# --------------------------------------------------------------------------- one log line, no traceback


@pytest.fixture(scope="module")
def cli_server(catalog: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`olarespack serve` as the CLI starts it."""
    root = tmp_path_factory.mktemp("cli")
    with running_server(write_market(root / "market", catalog), root / "serve.log") as base:
        yield base, root / "serve.log"


def test_a_mid_body_disconnect_logs_one_line_and_no_traceback(cli_server: tuple[str, Path]) -> None:
    base, log = cli_server
    sock = connect(base)
    sock.sendall(
        f"POST {DETAILS}?probe=midbody HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f'Content-Length: 1000\r\n\r\n{{"app_ids": ['.encode()
    )
    time.sleep(0.2)
    sock.close()
    text = log_text(log, "probe=midbody")
    lines = [line for line in text.splitlines() if "probe=midbody" in line]
    assert len(lines) == 1 and f'"POST {DETAILS}?probe=midbody" 499' in lines[0], lines
    assert "client disconnected" in lines[0]
    assert "Traceback" not in text and " 500 " not in text


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\nbad header\r\n\r\n", 400),
        (f"POST {DETAILS}?probe=x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".encode(), 400),
        (b"GET /health?probe=x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\r\n", 200),
        (b"GET /health?probe=x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\nUpgrade: h2c\r\n\r\n", 200),
    ],
)
def test_malformed_requests_log_one_line(cli_server: tuple[str, Path], raw: bytes, status: int) -> None:
    base, log = cli_server
    before = log.read_text().count("\n")
    sock = connect(base)
    sock.sendall(raw)
    answer, _ = read_until_closed(sock, 6)
    sock.close()
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer
    assert wait_for(lambda: log.read_text().count("\n") > before)
    time.sleep(0.2)
    new = log.read_text().splitlines()[before:]
    assert len(new) == 1 and f" {status} " in new[0], new
