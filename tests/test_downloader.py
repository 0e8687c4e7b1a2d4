"""The llama.cpp charts' model downloader, run for real: the script the chart carries (files/download-models.sh,
which the init container runs from a ConfigMap), taken from the chart olarespack renders and executed by this
machine's sh and curl against HTTP servers on loopback that play Hugging Face's endpoint (A) and its CDN (B,
another host name and port).

What must hold: HF_TOKEN reaches the endpoint's origin and nothing else (Hugging Face redirects downloads
to a CDN); an interrupted download continues from its .part with a Range request and lands only when
complete; a file already in place is left alone; only http and https redirects are followed."""

from __future__ import annotations

import random
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS
from olarespack.engines.llamacpp import LlamaCppEngine
from olarespack.project import render_apps
from olarespack.render import render_chart
from olarespack.spec.load import load_spec

pytestmark = pytest.mark.skipif(
    not (shutil.which("sh") and shutil.which("curl")),
    reason="the downloader runs in the pod with sh and curl; this machine lacks one of them",
)

SPEC = APPS / "gemma4-audio.yaml"
SCRIPT = "files/download-models.sh"
TOKEN = "hf_TestTokenThatMustNotLeave0123456789"


# --------------------------------------------------------------------------- the chart's init container


def helm_free(text: str) -> str:
    """A chart template with every Helm action replaced, so plain YAML can read it (the values under test
    contain none: Helm passes them through unchanged)."""
    return re.sub(r"\{\{.*?\}\}", "HELM", text)


def deployment(chart: dict[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(helm_free(chart["templates/deployment.yaml"]))
    return doc


def config_map(chart: dict[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(helm_free(chart["templates/model-downloader.yaml"]))
    return doc


def script_file(chart: dict[str, str], folder: Path) -> Path:
    """The chart's script where the pod has it: a file that sh reads (never `sh -c` text)."""
    path = folder / "download-models.sh"
    path.write_text(chart[SCRIPT], encoding="utf-8")
    return path


def mounted_script(chart: dict[str, str], init: dict[str, Any]) -> None:
    """The init container runs the script the chart carries: `sh <file>` from the downloader's ConfigMap,
    which Helm fills with files/download-models.sh as it is."""
    pod = deployment(chart)["spec"]["template"]["spec"]
    assert init["command"][0] == "sh" and len(init["command"]) == 2, (
        "the engine image's entrypoint is llama-server: sh is explicit, and reads a file"
    )
    folder, name = init["command"][1].rsplit("/", 1)
    [mount] = [m for m in init["volumeMounts"] if m["mountPath"] == folder]
    assert mount["readOnly"] is True
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    configmap = config_map(chart)
    assert volume["configMap"] == {"name": configmap["metadata"]["name"]}
    assert name == SCRIPT.rsplit("/", 1)[1]
    assert f'(.Files.Glob "{SCRIPT}").AsConfig' in chart["templates/model-downloader.yaml"]


@dataclass(frozen=True)
class Downloader:
    image: str
    script: str
    path: Path  # the script as a file, as the pod has it
    env: dict[str, str]  # the plain values the chart sets (HF_ENDPOINT and the token come from Olares)
    files: list[tuple[str, str]]  # (path in the repository, destination in the pod)
    engine_args: list[str]

    def resolve_path(self, remote: str) -> str:
        return f"/{self.env['MODEL_REPO']}/resolve/{self.env['MODEL_REVISION']}/{remote}"


@pytest.fixture(scope="module")
def downloader(tmp_path_factory: pytest.TempPathFactory) -> Downloader:
    [app] = render_apps([SPEC])
    pod = deployment(app.chart)["spec"]["template"]["spec"]
    [init] = pod["initContainers"]
    mounted_script(app.chart, init)
    script = app.chart[SCRIPT]
    env = {e["name"]: e["value"] for e in init["env"] if "value" in e and e["value"] != "HELM"}
    names = [e["name"] for e in init["env"]]
    assert names[:3] == ["MODEL_REPO", "MODEL_REVISION", "MODEL_FILES"]
    assert {"HF_ENDPOINT", "HF_TOKEN_PATH"} <= set(names)
    assert {"name": "huggingface-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in init[
        "volumeMounts"
    ]
    files = [(line.split()[0], line.split()[1]) for line in env["MODEL_FILES"].splitlines() if line.strip()]
    return Downloader(
        init["image"],
        script,
        script_file(app.chart, tmp_path_factory.mktemp("script")),
        env,
        files,
        pod["containers"][0]["args"],
    )


# --------------------------------------------------------------------------- loopback servers


@dataclass
class Blob:
    data: bytes
    ranges: bool = True  # answer Range requests with 206 (else with the whole file, 200)
    cut_at: int | None = None  # the first GET of the whole file stops after this many bytes
    head: bool = True  # answer HEAD (else 405, as some mirrors do)


@dataclass(frozen=True)
class Redirect:
    location: str
    status: int = 302


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names


@dataclass
class Server:
    routes: dict[str, Blob | Redirect] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    port: int = 0

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}"

    def authorizations(self) -> list[str | None]:
        return [r.headers.get("authorization") for r in self.requests]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: Server  # set on the subclass each server gets

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self.answer(body=False)

    def do_GET(self) -> None:
        self.answer(body=True)

    def send(self, status: int, headers: dict[str, str], body: bytes, with_body: bool) -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def answer(self, body: bool) -> None:
        self.owner.requests.append(Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        route = self.owner.routes.get(self.path)
        if route is None:
            self.send(404, {}, b"Entry not found", body)
        elif isinstance(route, Redirect):
            self.send(route.status, {"Location": route.location}, b"Found. Redirecting", body)
        elif not body and not route.head:
            self.send(405, {}, b"", body)
        else:
            self.serve(route, body)

    def serve(self, blob: Blob, body: bool) -> None:
        data, size = blob.data, len(blob.data)
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if match and blob.ranges:
            start = int(match[1])
            if start >= size:
                self.send(416, {"Content-Range": f"bytes */{size}"}, b"", body)
            else:
                self.send(206, {"Content-Range": f"bytes {start}-{size - 1}/{size}"}, data[start:], body)
            return
        if body and blob.cut_at is not None:
            cut, blob.cut_at = blob.cut_at, None
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send(200, {}, data, body)


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    """A plays the endpoint (HF_ENDPOINT), B the CDN; both on 127.0.0.1, B reached as localhost."""
    started = []
    for _ in range(2):
        server = Server()
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Bound", (Handler,), {"owner": server}))
        httpd.daemon_threads = True
        server.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append((server, httpd))
    yield started[0][0], started[1][0]
    for _, httpd in started:
        httpd.shutdown()
        httpd.server_close()


# --------------------------------------------------------------------------- running the script


def payload(name: str, size: int) -> bytes:
    return random.Random(name).randbytes(size)


@dataclass(frozen=True)
class Run:
    proc: subprocess.CompletedProcess[str]
    paths: dict[str, Path]  # path in the repository -> where it lands on this machine

    @property
    def log(self) -> str:
        return self.proc.stdout + self.proc.stderr


def local(tmp_path: Path, dest: str) -> Path:
    return tmp_path / "pod" / dest.lstrip("/")


def leave_part(tmp_path: Path, dest: str, content: bytes) -> None:
    """The `.part` file an interrupted earlier run left for `dest`."""
    part = local(tmp_path, dest + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(content)


def run(d: Downloader, tmp_path: Path, endpoint: str, token: str | None, shell: tuple[str, ...] = ("sh",)) -> Run:
    """The script as the pod runs it, its destinations moved under tmp_path/pod."""
    paths = {remote: local(tmp_path, dest) for remote, dest in d.files}
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),  # no ~/.curlrc of the machine's user
        "TMPDIR": str(tmp_path),
        "MODEL_REPO": d.env["MODEL_REPO"],
        "MODEL_REVISION": d.env["MODEL_REVISION"],
        "MODEL_FILES": "".join(f"{remote} {paths[remote]}\n" for remote, _ in d.files),
        "HF_ENDPOINT": endpoint,
    }
    if token is not None:  # as the pod gets it: a file from the Secret, named by HF_TOKEN_PATH
        (tmp_path / "token").write_text(token)
        env["HF_TOKEN_PATH"] = str(tmp_path / "token")
    proc = subprocess.run([*shell, str(d.path)], env=env, capture_output=True, text=True, timeout=120, check=False)
    return Run(proc, paths)


def contents(d: Downloader) -> dict[str, bytes]:
    return {remote: payload(remote, 200_000 + 7 * i) for i, (remote, _) in enumerate(d.files)}


def hf_like(d: Downloader, a: Server, b: Server, b_host: str, **blob: Any) -> dict[str, bytes]:
    """A answers each resolve URL with a redirect to a signed URL on B, which serves the file."""
    data = contents(d)
    for remote, body in data.items():
        signed = f"/xet/{remote}?X-Amz-Signature=abc123&Expires=9"
        a.routes[d.resolve_path(remote)] = Redirect(b.url(b_host) + signed)
        b.routes[signed] = Blob(body, **blob)
    return data


def assert_landed(result: Run, data: dict[str, bytes]) -> None:
    assert result.proc.returncode == 0, result.log
    for remote, body in data.items():
        path = result.paths[remote]
        assert path.read_bytes() == body, remote
        assert not path.with_name(path.name + ".part").exists()


# --------------------------------------------------------------------------- the chart


def test_the_chart_downloads_exactly_what_llama_server_reads(downloader: Downloader) -> None:
    spec = load_spec(SPEC)
    assert isinstance(spec.engine, LlamaCppEngine)
    remotes = [remote for remote, _ in downloader.files]
    assert remotes == [spec.engine.model.file, spec.engine.model.mmproj]
    read = [downloader.engine_args[downloader.engine_args.index(flag) + 1] for flag in ("--model", "--mmproj")]
    assert [dest for _, dest in downloader.files] == read
    assert downloader.env["MODEL_REPO"] == spec.engine.model.repo
    assert "apk " not in downloader.script and "wget" not in downloader.script  # nothing installed at start
    # what differs per app is the init container's env: the script names no repository, file or endpoint
    for value in (spec.engine.model.repo, spec.engine.model.file, spec.engine.model.mmproj, "huggingface.co"):
        assert value not in downloader.script


def test_without_a_downloader_image_the_engine_image_downloads() -> None:
    spec = load_spec(SPEC)
    assert isinstance(spec.engine, LlamaCppEngine)
    engine = spec.engine.model_copy(update={"downloader_image": None})
    chart = render_chart(spec.model_copy(update={"engine": engine}), str(SPEC))
    [init] = deployment(chart)["spec"]["template"]["spec"]["initContainers"]
    assert init["image"] == spec.engine.image == "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101"
    assert "downloader runs on the engine image" in chart["templates/deployment.yaml"]


def test_a_set_downloader_image_is_used(downloader: Downloader) -> None:
    spec = load_spec(SPEC)
    assert isinstance(spec.engine, LlamaCppEngine)
    assert downloader.image == (spec.engine.downloader_image or spec.engine.image)


# --------------------------------------------------------------------------- the token


@pytest.mark.parametrize("b_host", ["localhost", "127.0.0.1"], ids=["other-host", "other-port"])
@pytest.mark.parametrize("token", [TOKEN, TOKEN + "\n"], ids=["token", "token-newline"])
def test_the_token_goes_to_the_endpoint_and_never_to_the_cdn(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path, b_host: str, token: str
) -> None:
    a, b = servers
    data = hf_like(downloader, a, b, b_host)
    result = run(downloader, tmp_path, a.url(), token)
    assert_landed(result, data)
    assert a.requests and a.authorizations() == [f"Bearer {TOKEN}"] * len(a.requests)
    assert len(b.requests) == len(data)
    assert b.authorizations() == [None] * len(b.requests), "the token leaked to the CDN"
    assert TOKEN not in result.log


@pytest.mark.parametrize("token", [None, ""], ids=["unset", "empty"])
def test_without_a_token_no_request_carries_authorization(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path, token: str | None
) -> None:
    a, b = servers
    data = hf_like(downloader, a, b, "localhost")
    assert_landed(run(downloader, tmp_path, a.url(), token), data)
    assert a.requests and b.requests
    assert a.authorizations() + b.authorizations() == [None] * (len(a.requests) + len(b.requests))


def test_a_relative_redirect_stays_on_the_endpoint_with_the_token(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """A renamed repository: the endpoint redirects relatively (to itself), then to the CDN; the CDN
    redirects relatively too. The token stays on A throughout."""
    a, b = servers
    data = contents(downloader)
    for remote, body in data.items():
        a.routes[downloader.resolve_path(remote)] = Redirect(f"../../../renamed/resolve/main/{remote}", 307)
        signed = f"/xet/{remote}?sig=1"
        a.routes[f"/{downloader.env['MODEL_REPO'].split('/')[0]}/renamed/resolve/main/{remote}"] = Redirect(
            b.url("localhost") + f"/hop/{remote}"
        )
        b.routes[f"/hop/{remote}"] = Redirect(signed)
        b.routes[signed] = Blob(body)
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert_landed(result, data)
    assert len(a.requests) == 2 * len(data)
    assert a.authorizations() == [f"Bearer {TOKEN}"] * len(a.requests)
    assert b.authorizations() == [None] * (2 * len(data))


def test_a_relative_redirect_to_the_file_on_the_endpoint(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """A mirror that redirects relatively to where it serves the file itself."""
    a, _ = servers
    data = contents(downloader)
    for remote, body in data.items():
        a.routes[downloader.resolve_path(remote)] = Redirect(f"/files/{remote}")
        a.routes[f"/files/{remote}"] = Blob(body)
    assert_landed(run(downloader, tmp_path, a.url() + "/", TOKEN), data)
    assert a.authorizations() == [f"Bearer {TOKEN}"] * len(a.requests)


def test_a_redirect_to_another_scheme_is_refused(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    remote = downloader.files[0][0]
    a.routes[downloader.resolve_path(remote)] = Redirect("file:///etc/passwd")
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert result.proc.returncode != 0
    assert "refusing a redirect" in result.log
    assert not result.paths[remote].exists()
    assert len(a.requests) == 1 and b.requests == []  # not retried: it cannot get better


def test_a_cdn_redirect_to_another_scheme_is_refused(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    remote = downloader.files[0][0]
    a.routes[downloader.resolve_path(remote)] = Redirect(b.url("localhost") + "/hop")
    b.routes["/hop"] = Redirect("file:///etc/passwd")
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert result.proc.returncode != 0
    assert not result.paths[remote].exists()
    assert "curl would not follow" in result.log
    assert len(b.requests) == 1  # not retried: it cannot get better


def test_a_missing_file_fails_at_once(downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path) -> None:
    a, _ = servers
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert result.proc.returncode != 0
    assert "HTTP 404" in result.log and "giving up" in result.log
    assert len(a.requests) == 1


def test_an_image_without_curl_says_so(downloader: Downloader, tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sed", "tr", "mktemp", "rm"):
        found = shutil.which(tool)
        assert found
        (tools / tool).symlink_to(found)
    env = {"PATH": str(tools), "HF_ENDPOINT": "https://huggingface.co", **downloader.env}
    proc = subprocess.run(
        [shutil.which("sh") or "sh", str(downloader.path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 1
    assert "no curl in this image" in proc.stderr


@pytest.mark.parametrize("missing", ["MODEL_REPO", "MODEL_REVISION", "MODEL_FILES", "HF_ENDPOINT"])
def test_a_missing_setting_is_named_before_any_request(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path, missing: str
) -> None:
    a, _ = servers
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "HF_ENDPOINT": a.url(),
        **downloader.env,
    }
    for value in ("", None):
        given = {k: v for k, v in env.items() if k != missing} | ({} if value is None else {missing: value})
        proc = subprocess.run(
            ["sh", str(downloader.path)], env=given, capture_output=True, text=True, timeout=30, check=False
        )
        assert proc.returncode == 1
        assert f"model-downloader: {missing} is unset or empty" in proc.stderr
    assert a.requests == []


SHELLS = [shell for shell in ("dash", "bash", "busybox", "ksh", "mksh") if shutil.which(shell)]


@pytest.mark.parametrize("shell", SHELLS)
def test_every_posix_shell_here_runs_it_the_same(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path, shell: str
) -> None:
    """Images link sh to dash, bash or busybox: the script is POSIX sh, whichever reads it."""
    a, b = servers
    cut = 99_999
    data = hf_like(downloader, a, b, "localhost", cut_at=cut)
    result = run(downloader, tmp_path, a.url(), TOKEN, shell=(shell, "sh") if shell == "busybox" else (shell,))
    assert_landed(result, data)
    assert a.authorizations() == [f"Bearer {TOKEN}"] * len(a.requests)
    assert b.authorizations() == [None] * len(b.requests)
    first = downloader.files[0][0]
    assert [r.headers.get("range") for r in b.requests if first in r.path] == [None, f"bytes={cut}-"]


# --------------------------------------------------------------------------- resuming


def test_a_cut_download_continues_with_a_range_request(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    cut = 123_457
    data = hf_like(downloader, a, b, "localhost", cut_at=cut)
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert_landed(result, data)
    first = downloader.files[0][0]
    gets = [r for r in b.requests if first in r.path]
    assert [r.headers.get("range") for r in gets] == [None, f"bytes={cut}-"]
    assert f"interrupted at {cut} bytes" in result.log
    assert b.authorizations() == [None] * len(b.requests)


def test_a_part_left_by_an_earlier_run_is_continued(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    data = hf_like(downloader, a, b, "localhost")
    first = downloader.files[0][0]
    have = 77_777
    leave_part(tmp_path, downloader.files[0][1], data[first][:have])
    result = run(downloader, tmp_path, a.url(), None)
    assert_landed(result, data)
    assert [r.headers.get("range") for r in b.requests if first in r.path] == [f"bytes={have}-"]


def test_the_endpoint_serving_the_file_itself_gets_the_token_and_ranges(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """An Olares mirror on plain http that serves the file itself (and is cut once)."""
    a, _ = servers
    data = contents(downloader)
    for remote, body in data.items():
        a.routes[downloader.resolve_path(remote)] = Blob(body, cut_at=50_000)
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert_landed(result, data)
    first = downloader.files[0][0]
    assert [(r.method, r.headers.get("range")) for r in a.requests if first in r.path] == [
        ("HEAD", None),
        ("GET", None),
        ("HEAD", None),
        ("GET", "bytes=50000-"),
    ]
    assert a.authorizations() == [f"Bearer {TOKEN}"] * len(a.requests)


def test_an_endpoint_that_refuses_head_is_asked_with_get(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, _ = servers
    data = contents(downloader)
    for remote, body in data.items():
        a.routes[downloader.resolve_path(remote)] = Blob(body, head=False)
    assert_landed(run(downloader, tmp_path, a.url(), TOKEN), data)
    assert [r.method for r in a.requests] == ["HEAD", "GET"] * len(data)


def test_a_server_without_ranges_starts_over(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    data = hf_like(downloader, a, b, "localhost", ranges=False)
    first = downloader.files[0][0]
    leave_part(tmp_path, downloader.files[0][1], b"x" * 1000)  # not even the right bytes: they must not survive
    result = run(downloader, tmp_path, a.url(), None)
    assert_landed(result, data)
    assert [r.headers.get("range") for r in b.requests if first in r.path] == ["bytes=1000-", None]


# --------------------------------------------------------------------------- complete files


def test_a_file_in_place_is_left_alone(downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path) -> None:
    a, b = servers
    hf_like(downloader, a, b, "localhost")
    for _, dest in downloader.files:
        path = local(tmp_path, dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"already here")
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert result.proc.returncode == 0, result.log
    assert a.requests == [] and b.requests == []
    assert all(path.read_bytes() == b"already here" for path in result.paths.values())


def test_a_complete_part_is_renamed_without_downloading_again(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    data = hf_like(downloader, a, b, "localhost")
    first, dest = downloader.files[0]
    leave_part(tmp_path, dest, data[first])
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert_landed(result, data)
    assert [r.headers.get("range") for r in b.requests if first in r.path] == [f"bytes={len(data[first])}-"]


def test_a_part_longer_than_the_file_is_discarded(
    downloader: Downloader, servers: tuple[Server, Server], tmp_path: Path
) -> None:
    a, b = servers
    data = hf_like(downloader, a, b, "localhost")
    first, dest = downloader.files[0]
    leave_part(tmp_path, dest, data[first] + b"junk")
    result = run(downloader, tmp_path, a.url(), TOKEN)
    assert_landed(result, data)
    assert [r.headers.get("range") for r in b.requests if first in r.path] == [f"bytes={len(data[first]) + 4}-", None]


# --------------------------------------------------------------------------- a drafter from another repository


def test_a_drafter_from_another_repository_lands_beside_the_model(
    servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """A line "<file> <dest> <repo> <revision>" fetches from that repository; the others from MODEL_REPO."""
    spec = load_spec(SPEC)
    assert isinstance(spec.engine, LlamaCppEngine)
    engine = LlamaCppEngine.model_validate(
        {
            **spec.engine.model_dump(),
            "speculative": {
                "type": "draft",
                "drafter": {"repo": "AtomicChat/heads-GGUF", "file": "head.gguf", "revision": "v2"},
            },
        },
        strict=False,
    )
    chart = render_chart(spec.model_copy(update={"engine": engine}), str(SPEC))
    [init] = deployment(chart)["spec"]["template"]["spec"]["initContainers"]
    env = {e["name"]: e["value"] for e in init["env"] if "value" in e}
    lines = [line.split() for line in env["MODEL_FILES"].splitlines() if line.strip()]
    assert lines[-1] == ["head.gguf", f"{engine.model.folder}/head.gguf", "AtomicChat/heads-GGUF", "v2"]
    a, _ = servers
    data = {}
    for words in lines:
        repo, revision = (words[2], words[3]) if len(words) == 4 else (env["MODEL_REPO"], env["MODEL_REVISION"])
        data[words[0]] = payload(words[0], 50_000)
        a.routes[f"/{repo}/resolve/{revision}/{words[0]}"] = Blob(data[words[0]])
    moved = [[w[0], str(local(tmp_path, w[1])), *w[2:]] for w in lines]
    base_env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "MODEL_REPO": env["MODEL_REPO"],
        "MODEL_REVISION": env["MODEL_REVISION"],
        "HF_ENDPOINT": a.url(),
    }
    mounted_script(chart, init)
    script = script_file(chart, tmp_path)

    def download(files: list[list[str]]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", str(script)],
            env={**base_env, "MODEL_FILES": "".join(" ".join(w) + "\n" for w in files)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    proc = download(moved)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for words in moved:
        assert Path(words[1]).read_bytes() == data[words[0]]
    assert "downloading AtomicChat/heads-GGUF@v2 head.gguf" in proc.stdout
    # a repository without its revision, or one that is not owner/name, is refused before any request
    asked = len(a.requests)
    for hostile in (
        ["x.gguf", str(tmp_path / "x.gguf"), "AtomicChat/heads-GGUF"],
        ["x.gguf", str(tmp_path / "x.gguf"), "../../etc", "main"],
    ):
        proc = download([hostile])
        assert proc.returncode != 0 and "model-downloader:" in proc.stderr
    assert len(a.requests) == asked
