"""Olares 1.12.7's source sync and `olarespack market check`.

A test syncer (market/check.py, what `market check` runs) walks the 1.12.6 and the 1.12.7 sequences against a
market published with the real helm and served by `olarespack serve` (the Worker's walk is in
test_cloudflare.py); the probe's digest moves with a bump and with nothing else; the seed author's saved
answers (tests/data/author-market) are reported as a box would take them; hostile answers are judged, bounded and
printed escaped (a fake fetch: the walker's own reading, no server needed)."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conftest import APPS, ROOT, run_cli, spec_version
from olarespack.market import catalog as market
from olarespack.market.check import Walk, check
from olarespack.market.remote import http_fetch
from test_serve import get_json, publish_market, running_server

AUTHOR = ROOT / "tests" / "data" / "author-market" / "answers.json"
NAMES = {
    "llamacppgemma4audione": "gemma4-audio",
    "vllmgemma426ba4bvisionone": "gemma4-vision",
    "vllmgemma4dflashone": "gemma4-dflash",
}
SOURCE = ("--source-id", "market.example", "--source-label", "Example", "--source-name", "en-US=Example market")


def verdicts(walk: Walk) -> set[str]:
    return {step.verdict for step in walk.steps}


# --------------------------------------------------------------------------- olarespack's own market


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("check")
    shutil.copytree(APPS, root / "apps")
    publish_market(root / "apps", root / "market", *SOURCE)
    return root


@pytest.fixture(scope="module")
def server(project: Path) -> Iterator[str]:
    with running_server(project / "market", project / "serve.log", "--poll-seconds", "0.1") as base:
        yield base


@pytest.mark.helm
def test_every_olares_gets_every_app(server: str) -> None:
    """1.12.6 through the v1 sequence, 1.12.7 through the v2 one (probe, taxonomy, pages of applications,
    details and charts under /api/v2/), 1.12.5 at /legacy: every app, at the spec's version."""
    expected = {name: spec_version(stem) for name, stem in NAMES.items()}
    walks = check(http_fetch(server), ("1.12.6", "1.12.7")) + check(http_fetch(f"{server}/legacy"), ("1.12.5",))
    for walk in walks:
        assert verdicts(walk) == {"take"}, [s.line() for s in walk.steps]
        assert walk.apps == expected
    v2 = walks[1]
    assert [s.call.split("?")[0].split(" (")[0] for s in v2.steps[:4]] == [
        "GET /api/v2/catalog",
        "GET /api/v2/taxonomy",
        "GET /api/v2/applications",
        "POST /api/v2/applications/info",
    ]
    assert "'Example market' ('market.example')" in v2.steps[1].detail
    assert all(s.call.startswith("GET /api/v2/applications/") for s in v2.steps[4:])


@pytest.mark.helm
def test_the_root_url_gives_old_boxes_charts_they_cannot_install(server: str) -> None:
    """A 1.12.5 box asks for a chart with the chart's version, not its own: at the root URL it gets the current
    chart, which it refuses. The check says so and where such boxes go."""
    [walk] = check(http_fetch(server), ("1.12.5",))
    skips = [s for s in walk.steps if s.verdict == "skip"]
    assert len(skips) == 3 and not walk.apps
    assert all("needs Olares '>=1.12.6-0'" in s.detail and "/legacy" in s.detail for s in skips)


@pytest.mark.helm
def test_the_probe_moves_with_a_bump_and_nothing_else(project: Path, server: str, tmp_path: Path) -> None:
    apps, market_dir = tmp_path / "apps", tmp_path / "market"
    shutil.copytree(project / "apps", apps)
    shutil.copytree(project / "market", market_dir)

    def probe() -> dict[str, Any]:
        answers: dict[str, Any] = {}
        with running_server(market_dir, tmp_path / "serve.log") as base:
            for path in ("/api/v2/catalog?source_id=box", "/api/v2/taxonomy", "/api/v2/applications"):
                answers[path.split("?")[0].rsplit("/", 1)[1]] = get_json(base, path)["data"]
        return answers

    before = probe()
    catalog = (market_dir / market.CATALOG_FILE).read_bytes()
    publish_market(apps, market_dir, *SOURCE)  # the same specs again
    assert (market_dir / market.CATALOG_FILE).read_bytes() == catalog
    assert probe() == before

    spec = apps / "gemma4-audio.yaml"
    old = spec_version("gemma4-audio")
    new = old.rsplit(".", 1)[0] + f".{int(old.rsplit('.', 1)[1]) + 1}"
    text = spec.read_text(encoding="utf-8").replace(f"\nversion: {old}\n", f"\nversion: {new}\n", 1)
    spec.write_text(
        text.replace(
            "\nchangelog:\n", f"\nchangelog:\n  - version: {new}\n    date: 2026-12-07\n    note: A fix.\n", 1
        ),
        encoding="utf-8",
    )
    publish_market(apps, market_dir, *SOURCE)
    bumped = probe()
    assert bumped["catalog"]["apps_filter_digest"] != before["catalog"]["apps_filter_digest"]
    assert bumped["catalog"]["apps_last_modify_time"] > before["catalog"]["apps_last_modify_time"]
    assert bumped["catalog"]["taxonomy_last_modify_time"] == before["catalog"]["taxonomy_last_modify_time"]
    assert bumped["taxonomy"] == before["taxonomy"]
    [audio] = [i for i in bumped["applications"]["items"] if i["name"] == "llamacppgemma4audione"]
    assert audio["version"] == new
    assert audio["last_modify_time"] == audio["updated_at"] * 1000

    # an app the market stops offering is listed as removed, until it is offered again
    (apps / "gemma4-dflash.yaml").rename(tmp_path / "gemma4-dflash.yaml")
    publish_market(apps, market_dir, *SOURCE)
    gone = probe()
    dflash = market.app_id("vllmgemma4dflashone")
    assert gone["applications"]["removed"] == [dflash]
    assert dflash not in {i["app_id"] for i in gone["applications"]["items"]}
    assert gone["catalog"]["apps_filter_digest"] != bumped["catalog"]["apps_filter_digest"]
    assert gone["catalog"]["apps_last_modify_time"] > bumped["catalog"]["apps_last_modify_time"]
    (tmp_path / "gemma4-dflash.yaml").rename(apps / "gemma4-dflash.yaml")
    publish_market(apps, market_dir, *SOURCE)
    assert probe()["applications"]["removed"] == []


# --------------------------------------------------------------------------- the seed author's market


class SavedAnswers(BaseHTTPRequestHandler):
    """The author's Worker as his code routes (src/index.ts): the four v2 calls, and every v1 path under
    /api/v1/ or /api/v2/ alike; anything else 404 {"error": "Not Found"}. `v2` off: his Worker before 1.12.7."""

    answers: ClassVar[dict[str, Any]] = {}
    v2 = True

    def _answer(self, method: str) -> None:
        path = self.path.split("?")[0]
        native = path in ("/api/v2/catalog", "/api/v2/taxonomy", "/api/v2/applications")
        key = f"{method} {path if native else path.replace('/api/v2/', '/api/v1/', 1)}"
        if method == "POST":
            self.rfile.read(int(self.headers.get("content-length") or 0))
        found = self.answers.get(key) if self.v2 or not native else None
        body = json.dumps(found if found is not None else {"error": "Not Found"}).encode()
        self.send_response(200 if found is not None else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def author() -> Iterator[tuple[str, type[SavedAnswers]]]:
    handler = type("Author", (SavedAnswers,), {"answers": json.loads(AUTHOR.read_text(encoding="utf-8"))})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_authors_market_as_boxes_take_it(author: tuple[str, type[SavedAnswers]]) -> None:
    base, handler = author
    walks = {w.olares: w for w in check(http_fetch(base), ("1.12.5", "1.12.6", "1.12.7"), charts=False)}
    assert (
        walks["1.12.6"].apps
        == walks["1.12.7"].apps
        == {"vllmgemma4dflashone": "1.0.8", "llamacppgemma4audione": "1.1.3"}
    )
    assert verdicts(walks["1.12.7"]) == {"take"}
    taxonomy = walks["1.12.7"].steps[1]
    assert taxonomy.call.startswith("GET /api/v2/taxonomy") and "'Olares One' ('market.aamsellem')" in taxonomy.detail
    # his v1 answers offer every Olares his apps, which need 1.12.6: a 1.12.5 box cannot install them
    assert walks["1.12.5"].apps == {}
    assert [s.detail.split(":")[0] for s in walks["1.12.5"].steps if s.verdict == "skip"] == [
        "vllmgemma4dflashone",
        "llamacppgemma4audione",
    ]

    handler.v2 = False  # his Worker before it answered 1.12.7: the sync stops at the first call
    [walk] = check(http_fetch(base), ("1.12.7",), charts=False)
    assert walk.aborted and len(walk.steps) == 1
    assert walk.steps[0].call.startswith("GET /api/v2/catalog") and "404" in walk.steps[0].detail
    assert not walk.apps


def test_the_command_says_each_step_and_exits_1_on_an_abort(author: tuple[str, type[SavedAnswers]]) -> None:
    base, handler = author
    code, out = run_cli(None, "market", "check", base, "--no-charts")
    assert code == 0, out
    assert "Olares 1.12.7: the box gets 2 app(s)" in out and "Olares 1.12.6: the box gets 2 app(s)" in out
    handler.v2 = False
    code, out = run_cli(None, "market", "check", base, "--no-charts", "--olares", "1.12.7")
    assert code == 1 and "Olares 1.12.7: the sync stops" in out
    code, out = run_cli(None, "market", "check", "ftp://example.org")
    assert code == 2 and "not an http(s) URL" in out
    code, out = run_cli(None, "market", "check", base, "--olares", "latest")
    assert code == 2 and "--olares" in out


# --------------------------------------------------------------------------- hostile answers


def fake(answers: dict[str, Any]) -> Any:
    """A fetch over a table of (method, path without query) -> (status, body): the walker's reading alone."""

    def fetch(method: str, path: str, body: Any) -> tuple[int, str, bytes]:
        status, found = answers.get(f"{method} {path.split('?')[0]}", (404, {"error": "Not Found"}))
        return status, "application/json", found if isinstance(found, bytes) else json.dumps(found).encode()

    return fetch


def v2_market(**changes: Any) -> dict[str, Any]:
    saved = json.loads(AUTHOR.read_text(encoding="utf-8"))
    table = {key: (200, value) for key, value in saved.items() if not key.startswith("_")}
    for key, value in changes.items():
        table[key] = value
    return table


def test_an_iso_time_aborts_where_the_go_decoder_would() -> None:
    listing = json.loads(AUTHOR.read_text(encoding="utf-8"))["GET /api/v2/applications"]
    listing["data"]["items"][1]["updated_at"] = "2026-10-02T13:50:10Z"
    [walk] = check(fake(v2_market(**{"GET /api/v2/applications": (200, listing)})), ("1.12.7",), charts=False)
    assert walk.aborted and "data.items[1].updated_at: str '2026-10-02T13:50:10Z'" in walk.steps[-1].detail


def test_times_in_the_wrong_unit_and_excluded_apps_are_said() -> None:
    listing = json.loads(AUTHOR.read_text(encoding="utf-8"))["GET /api/v2/applications"]
    listing["data"]["items"][0]["last_modify_time"] = 1790949010  # seconds where milliseconds are wanted
    listing["data"]["items"][1]["olares_version_constraint"] = ">=1.13.0-0"
    [walk] = check(fake(v2_market(**{"GET /api/v2/applications": (200, listing)})), ("1.12.7",), charts=False)
    notes = [s.detail for s in walk.steps if s.verdict == "note"]
    assert any("last_modify_time is 1790949010, which reads as epoch seconds" in n for n in notes)
    assert walk.apps == {"vllmgemma4dflashone": "1.0.8"}
    assert any(s.verdict == "skip" and "excludes Olares 1.12.7" in s.detail for s in walk.steps)


@pytest.mark.parametrize(
    ("key", "answer", "said"),
    [
        ("GET /api/v2/catalog", (200, b"[" * 5000 + b"]" * 5000), "not JSON"),
        ("GET /api/v2/catalog", (500, b"\x1b]0;pwned\x07 oops"), "HTTP 500 ('\\x1b]0;pwned\\x07 oops')"),
        ("GET /api/v2/catalog", (200, {"code": 7, "msg": "\x1b[31mno\x1b[0m", "data": {}}), "code is 7"),
        (
            "GET /api/v2/taxonomy",
            (200, {"code": 0, "data": {"source": "x"}}),
            "data.source: str 'x', expected an object",
        ),
        ("GET /api/v2/applications", (200, {"code": 0, "data": {"items": {}, "removed": []}}), "data.items: dict"),
    ],
)
def test_a_malformed_answer_aborts_naming_the_field(key: str, answer: tuple[int, Any], said: str) -> None:
    [walk] = check(fake(v2_market(**{key: answer})), ("1.12.7",), charts=False)
    assert walk.aborted and said in walk.steps[-1].detail, walk.steps[-1].line()
    assert "\x1b" not in walk.steps[-1].line() and "\x07" not in walk.steps[-1].line()


def test_an_id_the_details_do_not_give_back_is_skipped() -> None:
    saved = json.loads(AUTHOR.read_text(encoding="utf-8"))
    details = saved["POST /api/v1/applications/info"]
    ident = market.app_id("llamacppgemma4audione")
    details["apps"][ident]["name"] = "\x1b[2Jsomething"
    [walk] = check(fake(v2_market(**{"POST /api/v1/applications/info": (200, details)})), ("1.12.7",), charts=False)
    assert walk.apps == {"vllmgemma4dflashone": "1.0.8"}
    [skip] = [s for s in walk.steps if s.verdict == "skip"]
    assert "is not the app's" in skip.detail and "\x1b" not in skip.line()


# --------------------------------------------------------------------------- the market's identity


@pytest.mark.helm
def test_the_identity_comes_from_the_settings_and_is_checked(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "apps", tmp_path / "apps")
    (tmp_path / "olarespack.yaml").write_text(
        "source:\n  id: market.settings\n  label: Settings\n  name: {en-US: From the settings, fr-FR: Réglages}\n",
        encoding="utf-8",
    )
    code, out = run_cli(tmp_path, "publish")
    assert code == 0, out
    assert "no identity of its own" not in out
    catalog = json.loads((tmp_path / "market" / market.CATALOG_FILE).read_bytes())
    assert catalog["source"] == {
        "source_id": "market.settings",
        "short_label": "Settings",
        "icon": "",
        "display_name": {"en-US": "From the settings", "fr-FR": "Réglages"},
        "is_official": False,
    }
    (tmp_path / "olarespack.yaml").unlink()
    code, out = run_cli(tmp_path, "publish", "--market-dir", "other")
    assert code == 0 and "WARN the market has no identity of its own" in out, out
    for bad, said in (
        (["--source-name", "Example"], "LOCALE=TEXT"),
        (["--source-id", "Not An Id", "--source-label", "x", "--source-name", "en-US=x"], "--source-id"),
        (["--source-id", "market.x", "--source-label", "x"], "--source-name"),
    ):
        code, out = run_cli(tmp_path, "publish", "--market-dir", "refused", *bad)
        assert code == 2 and said in out, out
        assert not (tmp_path / "refused").exists()


def test_category_ids_are_unique_and_found_for_any_names() -> None:
    """The v1 tags' `_id` and the v2 taxonomy's category ids: "X", "X-3" and "x" once looped for ever."""
    from olarespack.market.sections import category_ids

    for names in (["X", "X-3", "x"], ["Home Lab", "home-lab", "home lab", "Home-Lab-2"], ["All", "ÀI", "AI", "---"]):
        ids = category_ids(names)
        assert set(ids) == {"All", *names} and len(set(ids.values())) == len(ids)


@pytest.mark.helm
def test_publish_warns_of_an_app_another_source_offers_at_another_version(
    project: Path, tmp_path: Path, author: tuple[str, type[SavedAnswers]]
) -> None:
    """The seed author's market offers vllmgemma4dflashone at 1.0.8 and llamacppgemma4audione at 1.1.3: a box
    syncing both lists two apps of each name. His saved answers (a file) and his market (a URL) are read alike;
    one that cannot be read is said."""
    base, _ = author
    saved = tmp_path / "his-applications.json"
    saved.write_text(json.dumps(json.loads(AUTHOR.read_text(encoding="utf-8"))["GET /api/v2/applications"]))
    for other in (str(saved), base):
        code, out = run_cli(
            None,
            "publish",
            "--apps-dir",
            str(project / "apps"),
            "--market-dir",
            str(tmp_path / "market"),
            *SOURCE,
            "--other-source",
            other,
        )
        assert code == 0, out
        lines = sorted(line for line in out.splitlines() if "is also offered by" in line)
        assert len(lines) == 2 and all(line.startswith("WARN ") for line in lines), lines
        assert "name: llamacppgemma4audione is also offered by" in lines[0]
        assert f"at '1.1.3' (this market: {spec_version('gemma4-audio')})" in lines[0]
        assert f"at '1.0.8' (this market: {spec_version('gemma4-dflash')})" in lines[1]
    code, out = run_cli(
        None,
        "publish",
        "--apps-dir",
        str(project / "apps"),
        "--market-dir",
        str(tmp_path / "market"),
        *SOURCE,
        "--other-source",
        str(tmp_path / "nothing.json"),
    )
    assert code == 0 and "cannot be read" in out and "is also offered by" not in out, out


# --------------------------------------------------------------------------- a checked clone

BASE_MANIFEST = """olaresManifest.version: '0.12.0'
olaresManifest.type: app
apiVersion: 'v3'
metadata:
  name: llamabase
  icon: https://example.org/icon.png
  description: an engine-base app
  appid: llamabase
  title: Llama base
  version: '1.0.0'
  categories: [AI]
entrances:
  - {name: llamabase, host: llamabase, port: 8080, title: Llama base}
spec:
  versionName: '1.0.0'
  developer: test
  submitter: test
  locale: [en-US]
  supportArch: [amd64]
  accelerator:
    - {mode: nvidia, requiredCpu: 1, limitedCpu: 4, requiredMemory: 4Gi, limitedMemory: 8Gi, requiredDisk: 1Gi,
       limitedDisk: 2Gi, requiredGPUMemory: 8Gi, limitedGPUMemory: 8Gi}
permission: {appData: true}
options:
  dependencies: [{name: olares, version: '>=1.12.6-0', type: system}]
envs:
  - {envName: ENGINE_ARGS, required: true, type: string, default: "-c 8192 -ngl all -fa on"}
  - {envName: MODEL_MODE, required: true, type: string, default: chat, options: [{title: Chat, value: chat}]}
  - {envName: LLAMACPP_REQUIRED_GPU_MEMORY, required: true, type: string, default: 8Gi, regex: "^[0-9]+(Gi|Mi)?$"}
"""
BASE_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llamabase}
spec:
  selector: {matchLabels: {app: llamabase}}
  template:
    metadata: {labels: {app: llamabase}}
    spec:
      containers:
        - name: llamacpp
          image: ghcr.io/ggml-org/llama.cpp:server-cuda13-b11434
          command: ["/bin/sh", "-c", "exec /app/llama-server -hf x $ENGINE_ARGS"]
          env:
            - {name: ENGINE_ARGS, value: {{ .Values.olaresEnv.ENGINE_ARGS | quote }}}
"""


def base_chart(folder: Path) -> Path:
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: llamabase\nversion: 1.0.0\n")
    (folder / "values.yaml").write_text("{}\n")
    (folder / "OlaresManifest.yaml").write_text(BASE_MANIFEST)
    (folder / "templates" / "deployment.yaml").write_text(BASE_DEPLOYMENT)
    return folder


@pytest.mark.helm
def test_a_clone_is_checked_before_olares_makes_it(tmp_path: Path) -> None:
    """olares-cli market clone checks only the title: a clone whose ENGINE_ARGS the engine refuses installs and
    fails to serve. The clone's envs are rendered, ENGINE_ARGS judged by the image's release table (b11434)."""
    chart = base_chart(tmp_path / "llamabase")
    code, out = run_cli(None, "market", "clone-check", str(chart))
    assert code == 0 and "engine: llamacpp ghcr.io/ggml-org/llama.cpp:server-cuda13-b11434" in out, out
    code, out = run_cli(
        None,
        "market",
        "clone-check",
        str(chart),
        "--env",
        "ENGINE_ARGS=-c 8192 --draft-max 4 -ctk q9_0 LLAMA_ARG_THREADS=4",
        "--env",
        "LLAMACPP_REQUIRED_GPU_MEMORY=40Gi",
        "--env",
        "MODEL_MODE=chatty",
        "--env",
        "NOPE=1",
    )
    assert code == 1, out
    assert "--draft-max was removed from llama.cpp" in out and "use --spec-draft-n-max" in out
    assert "-ctk q9_0 is not a value" in out or "--cache-type-k q9_0 is not a value" in out
    assert "LLAMA_ARG_THREADS" not in out.split("\n", 1)[0]  # an env word, exported by the wrapper
    assert "books 40.0 GiB of GPU memory" in out and "'chatty' is not one of its options" in out
    assert "olaresEnv.NOPE: is not an env the app declares" in out
    code, out = run_cli(None, "market", "clone-check", str(chart), "--env", "LLAMACPP_REQUIRED_GPU_MEMORY=lots")
    assert code == 1 and "does not match the app's pattern" in out
    code, out = run_cli(None, "market", "clone-check", str(chart), "--env", "ENGINE_ARGS")
    assert code == 2 and "NAME=VALUE" in out


@pytest.mark.helm
def test_the_official_vllm_base_is_checked(tmp_path: Path) -> None:
    from conftest import shared

    chart = shared("corpus/olares-apps/vllmllmbasev3")
    code, out = run_cli(
        None,
        "market",
        "clone-check",
        str(chart),
        "--env",
        "MODEL_NAME=Qwen/Qwen3.5-2B",
        "--env",
        "ENGINE_ARGS=--max-model-len 65536 --gpu-memory-utilization 0.9 --enable-prefix-cachin",
        "--env",
        "VLLM_REQUIRED_GPU_MEMORY=20Gi",
    )
    assert code == 1 and "engine: vllm docker.io/vllm/vllm-openai:v0.27.1" in out, out
    assert "--enable-prefix-cachin is not an option of vLLM 0.27" in out
    code, out = run_cli(
        None,
        "market",
        "clone-check",
        str(chart),
        "--env",
        "MODEL_NAME=Qwen/Qwen3.5-2B",
        "--env",
        "ENGINE_ARGS=--max-model-len 65536 --enable-prefix-caching",
    )
    assert code == 0, out


def test_a_market_that_drips_its_answer_is_cut(tmp_path: Path) -> None:
    """A byte every 0.1 s never trips the silence timeout: the answer's whole deadline does."""
    import os
    import socket
    import time

    from olarespack.market.remote import ANSWER_DEADLINES, source_apps

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.1)

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    started = time.monotonic()
    fetch = http_fetch(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5)
    with pytest.raises(OSError, match="not answered whole within 3 s"):
        fetch("GET", "/api/v2/catalog", None)
    assert time.monotonic() - started < ANSWER_DEADLINES * 0.5 + 2
    stop.set()
    listener.close()
    # a saved answer must be a regular file: a named pipe would wait for a writer for ever
    pipe = tmp_path / "answers.json"
    os.mkfifo(pipe)
    with pytest.raises(ValueError, match="not a regular file"):
        source_apps(str(pipe))
