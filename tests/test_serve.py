"""`olarespack serve` as a real uvicorn process on 127.0.0.1: answers, generations, malformed requests,
files outside the market, CORS, logging and catalog reloads."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import APPS, ROOT, spec_version
from olarespack.cli import main
from olarespack.market import catalog as market

pytestmark = pytest.mark.helm  # the market is published with the real helm
HOST = "127.0.0.1"
VISION = "vllmgemma426ba4bvisionone"
VISION_ID = market.app_id(VISION)
V_VISION = spec_version("gemma4-vision")
Answer = tuple[int, dict[str, str], bytes]


# --------------------------------------------------------------------------- helpers (shared with the e2e test)


def publish_market(apps: Path, market_dir: Path, *extra: str) -> None:
    result = CliRunner().invoke(
        main, ["publish", "--apps-dir", str(apps), "--market-dir", str(market_dir), *extra], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stdout + result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def request(
    base: str, method: str, target: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def get_json(base: str, target: str) -> Any:
    status, headers, body = request(base, "GET", target)
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    return json.loads(body)


def post_json(base: str, target: str, payload: Any) -> Answer:
    return request(base, "POST", target, json.dumps(payload).encode(), {"Content-Type": "application/json"})


@contextmanager
def running_server(market_dir: Path, log: Path, *extra: str) -> Iterator[str]:
    """`olarespack serve` in a subprocess on a free loopback port; stopped on exit."""
    code = "import sys; from olarespack.cli import main; main.main(['serve', *sys.argv[1:]], prog_name='olarespack')"
    for _ in range(3):  # another process may take the free port before the server binds it
        port = free_port()
        with log.open("ab") as sink:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    code,
                    "--market-dir",
                    str(market_dir),
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    *extra,
                ],
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        base = f"http://{HOST}:{port}"
        try:
            if _wait_healthy(base, proc):
                yield base
                return
        finally:
            stop(proc)
    raise AssertionError(f"the server did not start:\n{log.read_text()}")


def stop(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    """Ask the server to stop; kill it if it has not within `grace` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if request(base, "GET", "/health")[0] == 200:
                return True
        except OSError:
            time.sleep(0.05)
    return False


def wait_for(condition: Any, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- fixtures


def market_with_traps(root: Path) -> Path:
    """The apps published with an icon into root/market, plus files a request must never reach: one outside
    the market, and a link from inside to outside."""
    shutil.copytree(APPS, root / "apps")
    (root / "apps" / "icons").mkdir()
    (root / "apps" / "icons" / f"{VISION}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16)
    publish_market(root / "apps", root / "market")
    (root / "secret.txt").write_text("secret")
    (root / "market" / "charts" / "current" / "evil-1.0.0.tgz").symlink_to(root / "secret.txt")
    return root


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return market_with_traps(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def server(published: Path) -> Iterator[str]:
    with running_server(published / "market", published / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def catalog(published: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((published / "market" / market.CATALOG_FILE).read_bytes())
    return data


# --------------------------------------------------------------------------- answers


@pytest.mark.parametrize("api", ["v1", "v2"])
@pytest.mark.parametrize(
    ("version", "generation"),
    [("1.12.3", "legacy"), ("1.12.5", "legacy"), ("1.12.6", "current"), ("1.13.0", "current")],
)
def test_the_box_version_picks_the_generation(
    server: str, catalog: dict[str, Any], api: str, version: str, generation: str
) -> None:
    expected = catalog["generations"][generation]
    answer = get_json(server, f"/api/{api}/appstore/hash?version={version}")
    assert answer == {"hash": expected["hash"], "last_updated": expected["last_updated"], "version": version}
    info = get_json(server, f"/api/{api}/appstore/info?version={version}")
    assert (info["version"], info["hash"]) == (version, expected["hash"])
    assert info["data"]["apps"] == expected["apps"] and info["data"]["tops"]
    status, _, body = post_json(server, f"/api/{api}/applications/info", {"app_ids": [VISION_ID], "version": version})
    assert status == 200
    assert json.loads(body) == {
        "apps": {VISION_ID: expected["details"][VISION_ID]},
        "version": version,
        "not_found": [],
    }


def test_without_a_version_the_current_generation_answers(server: str, catalog: dict[str, Any]) -> None:
    current = catalog["generations"]["current"]
    assert get_json(server, "/api/v1/appstore/hash")["hash"] == current["hash"]
    assert get_json(server, "/api/v1/appstore/hash")["version"] == "1.12.6"
    status, _, body = post_json(server, "/api/v1/applications/info", {"app_ids": [VISION_ID]})
    assert status == 200 and json.loads(body)["apps"][VISION_ID] == current["details"][VISION_ID]


def test_pinned_prefixes_ignore_the_version(server: str, catalog: dict[str, Any], published: Path) -> None:
    legacy = catalog["generations"]["legacy"]
    assert get_json(server, "/legacy/api/v1/appstore/hash?version=1.12.9")["hash"] == legacy["hash"]
    status, _, body = request(server, "GET", f"/legacy/api/v2/applications/{VISION}/chart?version=1.12.9")
    assert status == 200
    assert body == (published / "market" / "charts" / "legacy" / f"{VISION}-{V_VISION}.tgz").read_bytes()
    assert (
        get_json(server, "/current/api/v1/appstore/info?version=1.12.4")["hash"]
        == catalog["generations"]["current"]["hash"]
    )


def test_unknown_ids_are_listed_as_not_found(server: str) -> None:
    ids = [VISION_ID, "deadbeef", VISION_ID, "../../x", ""]
    status, _, body = post_json(server, "/api/v1/applications/info", {"app_ids": ids, "version": "1.12.6"})
    assert status == 200
    answer = json.loads(body)
    assert list(answer["apps"]) == [VISION_ID]
    assert answer["not_found"] == ["deadbeef", "../../x", ""]


# A box sends the chart's own version with a download, which is no generation preference.
@pytest.mark.parametrize(
    ("version", "generation"),
    [("1.12.5", "legacy"), ("1.12.6", "current"), (None, "current"), (V_VISION, "current"), ("0.9.0", "current")],
)
def test_charts_come_from_the_generation_folder(
    server: str, published: Path, version: str | None, generation: str
) -> None:
    query = f"fileName={VISION}-{V_VISION}.tgz" + (f"&version={version}" if version else "")
    status, headers, body = request(server, "GET", f"/api/v1/applications/{VISION}/chart?{query}")
    assert status == 200 and headers["content-type"] == "application/gzip"
    assert body == (published / "market" / "charts" / generation / f"{VISION}-{V_VISION}.tgz").read_bytes()
    # without fileName: the app's current version
    assert (
        request(server, "GET", f"/api/v2/applications/{VISION}/chart" + (f"?version={version}" if version else ""))[2]
        == body
    )


def test_icons_and_health(server: str, catalog: dict[str, Any]) -> None:
    status, headers, body = request(server, "GET", f"/icons/{VISION}.png")
    assert status == 200 and headers["content-type"] == "image/png" and body.startswith(b"\x89PNG")
    health = get_json(server, "/health")
    assert health["status"] == "ok" and health["icons"] == 1
    assert {g: v["hash"] for g, v in health["generations"].items()} == {
        g: v["hash"] for g, v in catalog["generations"].items()
    }


def test_cors_like_the_reference(server: str) -> None:
    _, headers, _ = request(server, "GET", "/api/v1/appstore/hash")
    assert headers["access-control-allow-origin"] == "*"
    status, headers, body = request(
        server,
        "OPTIONS",
        "/api/v1/applications/info",
        headers={"Origin": "https://x.example", "Access-Control-Request-Method": "POST"},
    )
    assert (status, body) == (204, b"")
    assert "POST" in headers["access-control-allow-methods"] and headers["access-control-allow-headers"]


def test_one_log_line_per_request(server: str, published: Path) -> None:
    request(server, "GET", "/health?probe=once")
    request(server, "GET", "/api/v1/appstore/hash?probe=twice")
    request(server, "GET", "/api/v1/appstore/hash?probe=twice")
    request(server, "GET", "/nowhere?probe=line%0Abreak")
    log = (published / "serve.log").read_text()
    assert wait_for(lambda: "probe=line" in (published / "serve.log").read_text())
    log = (published / "serve.log").read_text()
    assert log.count('"GET /health?probe=once" 200') == 1
    assert log.count('"GET /api/v1/appstore/hash?probe=twice" 200') == 2
    assert '"GET /nowhere?probe=line%0Abreak" 404' in log


# --------------------------------------------------------------------------- malformed requests


DETAILS = "/api/v1/applications/info"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "body: not JSON"),
        (b"\xff\xfe\x00", "body: not JSON"),
        (b"", "body: not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b"{}", "app_ids: expected a list"),
        (b'{"app_ids": "b3078d17"}', "app_ids: expected a list"),
        (b'{"app_ids": [1, 2]}', "app_ids: expected a list"),
        (b'{"app_ids": [null]}', "app_ids: expected a list"),
        (json.dumps({"app_ids": [f"{i:08x}" for i in range(11)]}).encode(), "at most 10 ids per request, got 11"),
        (b'{"app_ids": [], "version": 1.12}', "version: expected a string"),
        (b'{"app_ids": [], "version": "latest"}', "is not an Olares version"),
        (b'{"app_ids": [], "version": "1.11.0"}', "is not an Olares version"),
        (b'{"app_ids": [], "version": "1.12.5\\u0000x"}', "is not an Olares version"),
    ],
)
def test_bad_detail_bodies_get_400_with_a_message(server: str, body: bytes, message: str) -> None:
    status, headers, answer = request(server, "POST", DETAILS, body, {"Content-Type": "application/json"})
    assert status == 400, answer
    assert headers["content-type"] == "application/json"
    assert message in json.loads(answer)["error"]


def test_ten_ids_are_fine(server: str) -> None:
    status, _, body = post_json(server, DETAILS, {"app_ids": [f"{i:08x}" for i in range(9)] + [VISION_ID]})
    assert status == 200 and len(json.loads(body)["not_found"]) == 9


def test_bodies_are_bounded(server: str) -> None:
    huge = json.dumps({"app_ids": ["a" * 40_000]}).encode()
    status, _, body = request(server, "POST", DETAILS, huge, {"Content-Type": "application/json"})
    assert status == 413 and "at most" in json.loads(body)["error"]
    status, _, _ = request(server, "POST", DETAILS, b"{}", {"Content-Length": "99999999999"})
    assert status in (400, 413)  # a lying length is refused before any byte is read


def test_chunked_bodies_are_bounded_too(server: str) -> None:
    host, port = server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(
            "POST",
            DETAILS,
            body=iter([b"{" + b" " * 10_000] * 3),
            encode_chunked=True,
            headers={"Transfer-Encoding": "chunked"},
        )
        answer = conn.getresponse()
        assert answer.status == 413
    finally:
        conn.close()


@pytest.mark.parametrize(
    "target",
    [
        f"/api/v1/applications/{VISION}/chart?fileName=../../catalog.json",
        f"/api/v1/applications/{VISION}/chart?fileName=..%2F..%2Fcatalog.json",
        f"/api/v1/applications/{VISION}/chart?fileName=/etc/passwd",
        f"/api/v1/applications/{VISION}/chart?fileName=current/{VISION}-{V_VISION}.tgz",
        f"/api/v1/applications/{VISION}/chart?fileName={VISION}-{V_VISION}.tgz%00.png",
        f"/api/v1/applications/{VISION}/chart?fileName={VISION}-9.9.9.tgz",
        f"/api/v1/applications/{VISION}/chart?fileName=vllmgemma4dflashone-{spec_version('gemma4-dflash')}.tgz",
        f"/api/v1/applications/{VISION}/chart?fileName={'x' * 5000}",
        "/api/v1/applications/evil/chart?fileName=evil-1.0.0.tgz",
        "/api/v1/applications/nosuchapp/chart",
        "/api/v1/applications/..%2F..%2Fcatalog.json/chart",
        "/api/v1/applications/../../catalog.json/chart",
        "/api/v1/applications//chart",
        "/icons/../catalog.json",
        "/icons/..%2Fcatalog.json",
        "/icons/%2Fetc%2Fpasswd",
        "/icons/nosuch.png",
        "/catalog.json",
        "/charts/current/",
        "/static/current/api/v1/appstore/hash",
    ],
)
def test_nothing_outside_the_indexed_files_is_served(server: str, target: str) -> None:
    status, headers, body = request(server, "GET", target)
    assert status == 404, (target, body[:100])
    assert headers["content-type"] == "application/json" and b"secret" not in body


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        ("GET", DETAILS, 405),
        ("PUT", DETAILS, 405),
        ("POST", "/api/v1/appstore/hash", 405),
        ("DELETE", f"/api/v1/applications/{VISION}/chart", 405),
        ("GET", "/api/v3/appstore/hash", 404),
        ("GET", "/api/v1/appstore/hash?version=abc", 400),
        ("GET", "/api/v1/appstore/info?version=1.12", 400),
        ("GET", "/api/v1/appstore/hash?version=" + "1" * 300, 400),
    ],
)
def test_wrong_methods_paths_and_versions(server: str, method: str, target: str, status: int) -> None:
    answer = request(server, method, target)
    assert answer[0] == status, answer[2]
    assert "error" in json.loads(answer[2])


def test_garbage_never_gets_a_500(server: str, published: Path) -> None:
    targets = [
        "/%ff%fe",
        "/api/v1/appstore/hash?version=%ff",
        "/api/v1/appstore/hash?version=%00",
        "/api/v1/appstore/info?version=1.12.6&version=1.12.5",
        f"/api/v1/applications/{VISION}/chart?fileName=",
        "/icons/",
        "/icons/%00",
        "/api/v1/applications/%ff/chart",
        "/?" + "a=b&" * 500,
    ]
    for target in targets:
        assert request(server, "GET", target)[0] < 500, target
    for body in (b"{" * 5000, b'{"app_ids": [' + b"[" * 3000 + b"]" * 3000 + b"]}", b'"\\ud800"'):
        assert request(server, "POST", DETAILS, body)[0] in (400, 413)
    assert " 500 " not in (published / "serve.log").read_text()


# --------------------------------------------------------------------------- reloads


def test_a_rewritten_catalog_is_picked_up_and_a_broken_one_is_not(published: Path, tmp_path: Path) -> None:
    market_dir = tmp_path / "market"
    shutil.copytree(published / "market", market_dir, symlinks=True)
    catalog_file = market_dir / market.CATALOG_FILE
    good = json.loads(catalog_file.read_bytes())
    with running_server(market_dir, tmp_path / "serve.log", "--poll-seconds", "0.1") as base:
        old = get_json(base, "/api/v1/appstore/hash")["hash"]
        for broken in (b"{ half a catal", market.catalog_bytes({"format": market.FORMAT, "generations": {"x": {}}})):
            replace(catalog_file, broken)
            time.sleep(0.5)
            assert get_json(base, "/api/v1/appstore/hash")["hash"] == old  # the last good catalog stays
        good["generations"]["current"]["hash"] = "0123456789abcdef0123456789abcdef"
        replace(catalog_file, market.catalog_bytes(good))
        assert wait_for(lambda: get_json(base, "/api/v1/appstore/hash")["hash"] == "0123456789abcdef" * 2)
    log = (tmp_path / "serve.log").read_text()
    assert "unreadable catalog" in log and "malformed catalog (generations ['x']" in log and "Traceback" not in log


def replace(path: Path, data: bytes) -> None:
    """What publish does: a new file renamed over the old one."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_serve_without_a_catalog_says_what_to_do(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from olarespack.cli import main; main.main(['serve', *sys.argv[1:]])",
            "--market-dir",
            str(tmp_path),
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "run `olarespack publish" in proc.stderr


def test_the_benchmark_runs_and_stops_by_itself() -> None:
    """A tiny run of benchmarks/bench_serve.py, so the benchmark cannot rot between real runs."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_serve.py"),
            "--apps",
            "12",
            "--requests",
            "60",
            "--seconds",
            "5",
            "--connections",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for phase in ("hash", "info", "details"):
        assert re.search(rf"^{phase} +\d+ req in .* req/s .* p99 .* errors 0", proc.stdout, re.M), proc.stdout
