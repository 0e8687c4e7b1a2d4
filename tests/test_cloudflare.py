"""`olarespack export cloudflare`: the Worker it writes, run by Cloudflare's own runtime (the pinned
wrangler's `wrangler dev --local`, offline), answers what `olarespack serve` answers on the same market:
the same requests are sent to both and status, headers and bytes compared; the box sync of
test_sync_e2e runs against it; `wrangler deploy --dry-run` bundles it."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import test_sync_e2e as e2e
from conftest import APPS, run_cli, spec_name, spec_version, tree_bytes
from olarespack.market import answers, cloudflare, serve
from olarespack.market import catalog as market
from olarespack.market.check import check
from olarespack.market.remote import http_fetch
from test_serve import HOST, Answer, free_port, market_with_traps, publish_market, request, running_server
from worker_host import run_wrangler, running_worker, wrangler_binary

pytestmark = pytest.mark.helm  # the market is published with the real helm
VISION = "vllmgemma426ba4bvisionone"
VISION_ID = market.app_id(VISION)
V_VISION = spec_version("gemma4-vision")
DETAILS = "/api/v1/applications/info"
JSON = {"Content-Type": "application/json"}
# the headers a box or a browser acts on (date and server differ by nature)
COMPARED = (
    "content-type",
    "content-disposition",
    "cache-control",
    "location",
    "access-control-allow-origin",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-max-age",
)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A published market with an icon and a link to a file outside it (which neither may serve)."""
    return market_with_traps(tmp_path_factory.mktemp("cloudflare"))


@pytest.fixture(scope="module")
def exported(project: Path) -> Path:
    code, out = run_cli(
        None, "export", "cloudflare", "--market-dir", str(project / "market"), "--out", str(project / "worker")
    )
    assert code == 0, out
    return project / "worker"


@pytest.fixture(scope="module")
def server(exported: Path, project: Path) -> Iterator[str]:
    """The Worker (named `server` so the sync test of test_sync_e2e runs against it unchanged)."""
    wrangler_binary()
    with running_worker(exported, project / "wrangler.log") as base:
        yield base


@pytest.fixture(scope="module")
def reference(project: Path) -> Iterator[str]:
    with running_server(project / "market", project / "serve.log") as base:
        yield base


# --------------------------------------------------------------------------- the same answers


def _chart(query: str, prefix: str = "/api/v1") -> str:
    return f"{prefix}/applications/{VISION}/chart{query}"


VERSIONS = [
    "1.12.3",
    "1.12.5",
    "1.12.6",
    "1.13.0",
    "1.12.6-rc.1",
    "1.12.3-0",
    "1.12.6%2Bbuild.5",
    "1.12",
    "1",
    "1.12.2",
    "01.12.6",
    "abc",
    "",
    "1.12.5%0Ax",
    "%ff",
    "%00",
    "%C3%A9",
    "%E2%80%8B",
    "a'b",
    "a'b%22c",
    "%F0%9F%98%80",
    "1" * 300,
    "9" * 39,
    "1.12.6&version=1.12.5",
    "1.12.5&version=1.12.6",
    "+1.12.6",
]
GETS = [
    *(f"/api/v1/appstore/hash?version={v}" for v in VERSIONS),
    *(f"/api/v2/appstore/info?version={v}" for v in ("1.12.5", "1.12.6", "bad")),
    "/api/v1/appstore/hash",
    "/api/v1/appstore/info",
    "/api/v2/appstore/hash?other=1",
    "/legacy/api/v1/appstore/hash?version=1.12.9",
    "/current/api/v1/appstore/info?version=1.12.4",
    "/legacy/api/v2/appstore/hash?version=abc",
    "/current/api/v2/appstore/hash",
    *(_chart(f"?fileName={VISION}-{V_VISION}.tgz&version={v}") for v in ("1.12.5", "1.12.6", V_VISION, "0.9.0", "x")),
    _chart(""),
    _chart("?version=1.12.5"),
    _chart("?version=1.12.9", "/legacy/api/v2"),
    _chart("?fileName="),
    _chart(f"?fileName={VISION}-{V_VISION}.tgz", "/legacy/api/v1"),
    _chart("?fileName=../../catalog.json"),
    _chart("?fileName=..%2F..%2Fcatalog.json"),
    _chart("?fileName=/etc/passwd"),
    _chart(f"?fileName=current/{VISION}-{V_VISION}.tgz"),
    _chart(f"?fileName={VISION}-{V_VISION}.tgz%00.png"),
    _chart(f"?fileName={VISION}-9.9.9.tgz"),
    _chart(f"?fileName=vllmgemma4dflashone-{spec_version('gemma4-dflash')}.tgz"),
    _chart("?fileName=" + "x" * 5000),
    _chart("?fileName=%C3%A9'%22"),
    "/api/v1/applications/evil/chart?fileName=evil-1.0.0.tgz",
    "/api/v1/applications/nosuchapp/chart",
    "/api/v1/applications/..%2F..%2Fcatalog.json/chart",
    "/api/v1/applications/../../catalog.json/chart",
    "/api/v1/applications//chart",
    "/api/v1/applications/%ff/chart",
    "/api/v1/applications/a%0Ab/chart",
    f"/icons/{VISION}.png",
    "/icons/nosuch.png",
    "/icons/",
    "/icons/%00",
    "/icons/../catalog.json",
    "/icons/..%2Fcatalog.json",
    "/icons/%2Fetc%2Fpasswd",
    "/icons/%ff.png/",
    "/health",
    "/healthz",
    "/health/",
    "/health//",
    "/health%0A",
    "/health/?a=%20b",
    "/legacy",
    "/legacy/",
    "/legacy//",
    "/legacy/api/v1/appstore/hash/?version=1.12.5",
    "/",
    "/catalog.json",
    "/charts/current/",
    "/static/current/api/v1/appstore/hash",
    "/api/v3/appstore/hash",
    "/nowhere?probe=line%0Abreak",
    "/%ff%fe",
    "/?" + "a=b&" * 500,
    # 1.12.7's sync
    *(
        f"/api/v2/catalog{q}"
        for q in (
            "",
            "?source_id=market.box",
            "?version=1.12.5",
            "?version=bad",
            "?source_id=" + "s" * 129,
            "?source_id=%C3%A9%22'",
            "?source_id=",
            "?source_id=a&source_id=b",
        )
    ),
    "/api/v2/taxonomy",
    "/legacy/api/v2/taxonomy",
    "/api/v2/taxonomy?version=1.12.5",
    "/api/v1/taxonomy",
    *(
        f"/api/v2/applications{q}"
        for q in (
            "",
            "?page=1&size=1",
            "?page=2&size=2",
            "?page=3&size=1",
            "?page=9&size=2",
            "?size=0",
            "?page=0",
            "?page=-1",
            "?size=1001",
            "?size=x",
            "?page=1.5",
            "?page=%EF%BC%91",
            "?page=" + "1" * 8,
            "?size=%20",
            "?version=1.12.5",
        )
    ),
    "/api/v2/browse/applications?page=1&size=2",
    "/current/api/v2/browse/applications",
    "/api/v2/catalog/",
]
BODIES: list[bytes] = [
    json.dumps({"app_ids": [VISION_ID], "version": v}).encode() for v in ("1.12.5", "1.12.6", "1.12.9", "1.11.0")
] + [
    json.dumps({"app_ids": [VISION_ID]}).encode(),
    json.dumps(
        {"app_ids": [VISION_ID, "deadbeef", VISION_ID, "../../x", "", "é", "\ud800", "\x7f", "😀", '"\\']}
    ).encode(),
    json.dumps({"app_ids": [f"{i:08x}" for i in range(9)] + [VISION_ID]}).encode(),
    json.dumps({"app_ids": [f"{i:08x}" for i in range(11)]}).encode(),
    json.dumps({"app_ids": ["a" * 40_000]}).encode(),
    b"not json",
    b"\xff\xfe\x00",
    b"",
    b"[1, 2]",
    b"{}",
    b'{"app_ids": "b3078d17"}',
    b'{"app_ids": [1, 2]}',
    b'{"app_ids": [null]}',
    b'{"app_ids": [], "version": 1.12}',
    b'{"app_ids": [], "version": "latest"}',
    b'{"app_ids": [], "version": "1.12.5\\u0000x"}',
    b'{"app_ids": [], "version": ""}',
    b'{"app_ids": [], "version": null}',
    b'"\\ud800"',
    b"{" * 5000,
    b"\xef\xbb\xbf" + json.dumps({"app_ids": [VISION_ID]}).encode(),
    b'{"app_ids": [], "app_ids": ["' + VISION_ID.encode() + b'"]}',
    b'{"__proto__": {"app_ids": []}}',
    b'{"app_ids": [], "version": "' + b"\xc3\xa9" * 50 + b'"}',
]
REQUESTS: list[tuple[str, str, bytes | None]] = [
    *(("GET", target, None) for target in GETS),
    *(("POST", path, body) for body in BODIES for path in (DETAILS,)),
    ("POST", "/legacy/api/v2/applications/info", BODIES[1]),
    ("POST", "/current/api/v1/applications/info", BODIES[0]),
    ("GET", DETAILS, None),
    ("PUT", DETAILS, b"{}"),
    ("POST", "/api/v1/appstore/hash", b"{}"),
    ("DELETE", _chart(""), None),
    ("PATCH", "/health", None),
    ("POST", "/health/", b""),
    ("POST", "/nowhere", b"{}"),
    ("HEAD", "/api/v1/appstore/hash", None),
    ("HEAD", _chart(""), None),
    ("HEAD", DETAILS, None),
    ("HEAD", "/nowhere", None),
    ("OPTIONS", DETAILS, None),
    ("OPTIONS", "/nowhere", None),
    ("POST", "/api/v2/catalog", b"{}"),
    ("HEAD", "/api/v2/taxonomy", None),
]


def _compared(answer: Answer, base: str) -> tuple[int, dict[str, str], bytes]:
    status, headers, body = answer
    shown = {k: v.replace(base, "http://HOST") for k, v in headers.items() if k in COMPARED}
    return status, shown, body


@pytest.mark.parametrize(
    ("method", "target", "body"), REQUESTS, ids=[f"{m} {t[:60]} {(b or b'')[:30]!r}" for m, t, b in REQUESTS]
)
def test_the_worker_answers_as_serve_does(
    server: str, reference: str, method: str, target: str, body: bytes | None
) -> None:
    headers = JSON if body is not None else {}
    expected = _compared(request(reference, method, target, body, headers), reference)
    assert _compared(request(server, method, target, body, headers), server) == expected
    assert expected[0] < 500


# Where the platform differs (the Worker runtime resolves dot segments in a URL before any code sees it;
# Python's json accepts NaN and reads UTF-16, and its recursion limit turns deep nesting into "not JSON"),
# the answers still agree on the status, and neither is a 500.
@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("GET", "/api/v1/applications/%2e%2e/chart", None),
        ("GET", "/api/v1/applications/./chart", None),
        ("POST", DETAILS, b'{"app_ids": [], "version": NaN}'),
        ("POST", DETAILS, b'{"app_ids": ' + b"[" * 3000 + b"]" * 3000 + b"}"),
        ("POST", DETAILS, json.dumps({"app_ids": [VISION_ID]}).encode("utf-16")),
    ],
)
def test_where_the_platform_differs_the_status_agrees(
    server: str, reference: str, method: str, target: str, body: bytes | None
) -> None:
    ours, theirs = request(server, method, target, body), request(reference, method, target, body)
    assert ours[0] == theirs[0] or {ours[0], theirs[0]} == {200, 400}, (ours, theirs)
    assert ours[0] < 500 and json.loads(ours[2]) is not None


def test_every_olares_syncs_every_app_from_the_worker(server: str) -> None:
    """The sync walk of `market check` (test_market_check.py runs it against serve): 1.12.6 by the v1 calls,
    1.12.7 by the v2 ones, 1.12.5 at /legacy; every app at the spec's version."""
    expected = {
        spec_name(APPS / f"{stem}.yaml"): spec_version(stem)
        for stem in ("gemma4-audio", "gemma4-dflash", "gemma4-vision")
    }
    walks = check(http_fetch(server), ("1.12.6", "1.12.7")) + check(http_fetch(f"{server}/legacy"), ("1.12.5",))
    for walk in walks:
        assert {s.verdict for s in walk.steps} == {"take"}, [s.line() for s in walk.steps]
        assert walk.apps == expected


# A body past the bound gets its 413 whatever its size or framing. (A body shorter than its Content-Length
# gets no answer from the Worker until the client sends the rest or gives up: the platform holds the
# request until then; serve answers it at once.)
@pytest.mark.parametrize("chunks", [1, 100])
def test_bodies_are_bounded(server: str, chunks: int) -> None:
    host, port = server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        if chunks == 1:
            conn.request("POST", DETAILS, body=b"{" + b" " * 2_000_000, headers=JSON)
        else:
            conn.request(
                "POST",
                DETAILS,
                body=iter([b"{" + b" " * 10_000] * chunks),
                encode_chunked=True,
                headers={"Transfer-Encoding": "chunked"},
            )
        answer = conn.getresponse()
        assert (answer.status, json.loads(answer.read())) == (413, {"error": "body: at most 16384 bytes"})
    finally:
        conn.close()
    assert request(server, "GET", "/health")[0] == 200  # and the Worker still answers


# --------------------------------------------------------------------------- the box's sync


# test_sync_e2e's own test, run against the Worker: this module's `server` fixture is the Worker
test_a_box_syncs_and_installs_from_the_worker = e2e.test_a_box_syncs_and_installs_the_seed_apps


def test_a_bump_reaches_boxes_through_a_new_export(tmp_path: Path) -> None:
    apps = tmp_path / "apps"
    shutil.copytree(APPS, apps)
    publish_market(apps, tmp_path / "market")
    worker = tmp_path / "worker"
    assert run_cli(None, "export", "cloudflare", "--market-dir", str(tmp_path / "market"), "--out", str(worker))[0] == 0
    boxes = {v: e2e.Box(v) for v in e2e.BOXES}
    with running_worker(worker, tmp_path / "wrangler.log") as base:
        for box in boxes.values():
            assert e2e.sync(base, box)
    old = {v: (box.local_hash, dict(box.details)) for v, box in boxes.items()}

    before = e2e.bump_vision_and_publish(apps, tmp_path / "market")
    assert run_cli(None, "export", "cloudflare", "--market-dir", str(tmp_path / "market"), "--out", str(worker))[0] == 0
    with running_worker(worker, tmp_path / "wrangler.log") as base:
        for olares, box in boxes.items():
            assert e2e.sync(base, box) and box.local_hash != old[olares][0]
            assert box.details[VISION_ID]["version"] == "9.0.0" and f"{VISION}-9.0.0.tgz" in box.charts
            assert {i: d for i, d in box.details.items() if i != VISION_ID} == {
                i: d for i, d in old[olares][1].items() if i != VISION_ID
            }
            status, _, archive = request(base, "GET", _chart(f"?fileName={VISION}-{before}.tgz&version={olares}"))
            generation = e2e.BOXES[olares][0]
            assert status == 200
            assert archive == (tmp_path / "market" / "charts" / generation / f"{VISION}-{before}.tgz").read_bytes()


# --------------------------------------------------------------------------- the export itself


def test_wrangler_deploy_bundles_it_offline(exported: Path, tmp_path: Path) -> None:
    work = tmp_path / "worker"
    shutil.copytree(exported, work, ignore=shutil.ignore_patterns(".wrangler"))
    done = run_wrangler(work, tmp_path / "home", "deploy", "--dry-run", "--outdir", str(tmp_path / "dist"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--dry-run: exiting now." in done.stdout + done.stderr
    bundle = (tmp_path / "dist" / "index.js").read_text(encoding="utf-8")
    assert "no such icon" in bundle and VISION in bundle  # the script and its route table


def test_the_same_market_gives_the_same_export(project: Path, tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert (
            run_cli(
                None, "export", "cloudflare", "--market-dir", str(project / "market"), "--out", str(tmp_path / out)
            )[0]
            == 0
        )
    first = tree_bytes(tmp_path / "a")
    assert first == tree_bytes(tmp_path / "b")
    released = {f"{spec_name(f)}-{spec_version(f.stem)}.tgz" for f in sorted(APPS.glob("*.yaml"))}
    assert sorted(p for p in first if p.startswith("assets/charts/")) == sorted(
        f"assets/charts/{gen}/{p.name}"
        for gen in ("current", "legacy")
        for p in (project / "market" / "charts" / gen).glob("*.tgz")
        if p.name in released and not p.is_symlink()
    )
    assert not any("evil" in p or "catalog.json" in p for p in first)  # only what serve indexes
    # a second export into the same folder replaces it whole
    (tmp_path / "a" / "assets" / "stale.txt").write_text("left over")
    assert (
        run_cli(None, "export", "cloudflare", "--market-dir", str(project / "market"), "--out", str(tmp_path / "a"))[0]
        == 0
    )
    assert tree_bytes(tmp_path / "a") == first


def test_export_refusals_say_what_to_do(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run_cli(
        None, "export", "cloudflare", "--market-dir", str(tmp_path / "nomarket"), "--out", str(tmp_path / "w")
    )
    assert code == 2 and "run `olarespack publish" in out
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    code, out = run_cli(
        None, "export", "cloudflare", "--market-dir", str(project / "market"), "--out", str(tmp_path / "mine")
    )
    assert code == 1 and "not an olarespack export" in out and (tmp_path / "mine" / "notes.txt").exists()
    code, out = run_cli(None, "export", "cloudflare", "--market-dir", str(project / "market"), "--out", str(project))
    assert code == 2 and "holds the market folder" in out
    code, out = run_cli(
        None,
        "export",
        "cloudflare",
        "--market-dir",
        str(project / "market"),
        "--out",
        str(tmp_path / "w"),
        "--name",
        "Not_A_Name",
    )
    assert code == 2 and "--name" in out
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / market.CATALOG_FILE).write_text("{ half")
    code, out = run_cli(
        None, "export", "cloudflare", "--market-dir", str(tmp_path / "broken"), "--out", str(tmp_path / "w")
    )
    assert code == 1 and "unreadable catalog" in out and "Traceback" not in out
    monkeypatch.setattr(cloudflare, "MAX_ASSET_BYTES", 2000)
    code, out = run_cli(
        None, "export", "cloudflare", "--market-dir", str(project / "market"), "--out", str(tmp_path / "w")
    )
    assert code == 2 and "assets/answers/current-" in out and "at most 2000 bytes (publish fewer" in out
    assert not (tmp_path / "w").exists()


def test_the_route_table_is_serves(exported: Path) -> None:
    table: dict[str, Any] = json.loads((exported / "worker" / "market.json").read_bytes())
    endpoints = [r["endpoint"] for r in table["routes"] if "endpoint" in r]
    v1 = ["hash", "info", "details", "chart"]
    assert endpoints == [
        "v2Catalog",
        "v2Taxonomy",
        "v2Applications",
        "v2Applications",
        *v1 * 2,
        "icon",
        "health",
        "alive",
    ]
    assert [r["pinned"] for r in table["routes"] if "pinned" in r] == ["current", "legacy"]
    assert cloudflare.js_pattern("^/x/(?P<path>.*)$") == "^/x/(?<path>[^\\n]*)\\n?$"
    with pytest.raises(ValueError, match="would read differently"):
        cloudflare.js_pattern("^/a.b$")


# --------------------------------------------------------------------------- one table, both answers


def test_the_workers_answer_table_is_the_one_serve_reads(exported: Path) -> None:
    table: dict[str, Any] = json.loads((exported / "worker" / "market.json").read_bytes())
    assert table["answers"] == answers.table()
    script = (exported / "worker" / "index.js").read_text(encoding="utf-8")
    # the answers' texts live in the table only, not in the script
    assert not any(f.text in script for f in answers.FAILURES.values())
    assert "max-age=3600" not in script and "1.12.3" not in script and "application/" not in script


@contextlib.contextmanager
def serving_in_process(market_dir: Path) -> Iterator[str]:
    """serve in this process (so it reads this process's table), on a free loopback port."""
    port = free_port()
    server = serve.make_server(market_dir, HOST, port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started, "serve did not start"
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_decision_changed_in_the_table_changes_serve_and_the_worker(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error answer, a header, the CORS policy and the version that starts a generation, each changed in
    answers.py only: serve and a fresh export of the Worker both answer with the change."""
    monkeypatch.setitem(answers.FAILURES, "no_icon", answers.Failure(410, "no icon by that name"))
    monkeypatch.setattr(answers, "ICON_CACHE", "no-store")
    monkeypatch.setattr(answers, "CORS", (("access-control-allow-origin", "https://box.example"),))
    monkeypatch.setattr(answers, "GENERATION_FLOORS", [((1, 12, 3), "legacy"), ((1, 12, 5), "current")])
    worker = tmp_path / "worker"
    cloudflare.export_cloudflare(project / "market", worker)
    current = json.loads((project / "market" / market.CATALOG_FILE).read_bytes())["generations"]["current"]["hash"]
    targets = [
        ("GET", "/icons/nosuch.png"),
        ("GET", f"/icons/{VISION}.png"),
        ("OPTIONS", "/anywhere"),
        ("GET", "/api/v1/appstore/hash?version=1.12.5"),
    ]
    with serving_in_process(project / "market") as base:
        served = [_compared(request(base, method, target), base) for method, target in targets]
    with running_worker(worker, tmp_path / "wrangler.log") as base:
        assert [_compared(request(base, method, target), base) for method, target in targets] == served
    gone, icon, preflight, hashed = served
    assert gone[0] == 410 and json.loads(gone[2]) == {"error": "no icon by that name"}
    assert icon[0] == 200 and icon[1]["cache-control"] == "no-store"
    assert preflight[0] == 204 and preflight[1]["access-control-allow-origin"] == "https://box.example"
    assert "access-control-allow-methods" not in preflight[1]
    answer = json.loads(hashed[2])  # 1.12.5 now starts the current generation
    assert hashed[0] == 200 and (answer["version"], answer["hash"]) == ("1.12.5", current)


# --------------------------------------------------------------------------- requests the platform refuses


def _raw(base: str, data: bytes) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


def test_two_host_headers_are_refused_by_the_runtime_before_the_worker_runs(
    server: str, reference: str, project: Path
) -> None:
    """workerd's HTTP layer (kj) cannot make a URL of `Host: x, y` and answers a bare 500 itself: no Worker code
    runs (every answer of the Worker carries CORS headers, and wrangler logs each request it hands on).
    Cloudflare's edge parses requests before any Worker too; serve's uvicorn answers 400."""
    log = project / "wrangler.log"
    before = len(log.read_bytes())
    twice = b"GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"
    assert _raw(reference, twice).startswith(b"HTTP/1.1 400 ")
    answer = _raw(server, twice)
    assert answer.startswith(b"HTTP/1.1 500 ") and answer.endswith(b"\r\n\r\nInternal Server Error"), answer
    assert b"access-control-allow-origin" not in answer.lower()
    deadline = time.monotonic() + 10
    while b"invalid hostname" not in log.read_bytes()[before:] and time.monotonic() < deadline:
        time.sleep(0.1)
    added = log.read_bytes()[before:]
    assert b"invalid hostname when stringifying URL; host = x, y" in added and b"GET /health" not in added


CHUNKED = f"POST {DETAILS} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"


@pytest.mark.parametrize(
    "tail",
    [b"zz\r\n", b"0x2\r\n{}\r\n0\r\n\r\n", b"2\r\n{}XX0\r\n\r\n", b"-1\r\n{}\r\n0\r\n\r\n", b"1\r\n{\r\nzz\r\n\r\n"],
)
def test_a_malformed_chunked_body_is_a_400(server: str, reference: str, tail: bytes) -> None:
    """The Worker answers 400 to a body it cannot read, as serve does. Under `wrangler dev` the local proxy in
    front of it may answer 503 ("Your worker restarted mid-request") instead when the stream breaks while it
    forwards it; neither answers 500."""
    assert _raw(reference, CHUNKED.encode() + tail).startswith(b"HTTP/1.1 400 ")
    answer = _raw(server, CHUNKED.encode() + tail)
    head, _, payload = answer.partition(b"\r\n\r\n")
    if head.startswith(b"HTTP/1.1 503 "):
        assert payload.startswith(b"Your worker restarted mid-request"), answer
    else:
        assert head.startswith(b"HTTP/1.1 400 ") and b"access-control-allow-origin" in head.lower(), answer
        assert json.loads(payload)["error"].startswith(("body: ", "app_ids: "))
