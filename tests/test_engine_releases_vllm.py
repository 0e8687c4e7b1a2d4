"""`olarespack releases refresh --engine vllm` (engines/vllm/tables/surface.py): vLLM's option surface read from a
wheel's sources (a hand-written mini wheel here, never imported), and the committed per-release data it produced
from the PyPI wheels."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from olarespack.engines.vllm.tables import surface as vllm_surface
from olarespack.engines.vllm.tables import wheels as wheel_cache

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "vllm-wheel-mini"
GENERATED = ROOT / "src" / "olarespack" / "engines" / "vllm" / "releases"


def make_wheel(
    tmp_path: Path, *, drop: str = "", rename: tuple[str, str] = ("", ""), replace: dict[str, str] | None = None
) -> Path:
    wheel = tmp_path / "vllm-9.9.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in sorted(FIXTURE.rglob("*.py")):
            name = path.relative_to(FIXTURE).as_posix()
            if name == drop:
                continue
            text = (replace or {}).get(name, path.read_text())
            archive.writestr(rename[1] if name == rename[0] else name, text)
        archive.writestr("vllm-9.9.0.dist-info/METADATA", "Name: vllm\nVersion: 9.9.0\n")
    return wheel


def run(tmp_path: Path, wheel: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    code, said = run_cli(None, "releases", "refresh", "--engine", "vLLM", "--out", str(out), "--wheel", str(wheel))
    return code, said, out / "vllm-9.9.json"


def test_mini_wheel_surface(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = make_wheel(tmp_path)
    code, err, target = run(tmp_path, wheel, capsys)
    assert code == 0, err
    text = target.read_text()
    facts = json.loads(text)
    assert facts["artifact"] == {
        "file": wheel.name,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "size": wheel.stat().st_size,
        "version": "9.9.0",
    }
    assert facts["written_by"] == {
        "tool": "olarespack releases refresh",
        "command": "olarespack releases refresh --engine vllm 9.9.0",
    }
    assert facts["engine_args"] == {
        "model": ["--model"],
        "max_model_len": ["--max-model-len"],
        "gpu_memory_utilization": ["--gpu-memory-utilization", "--device-memory-utilization"],
        "kv_cache_dtype": ["--kv-cache-dtype"],
        "enforce_eager": ["--enforce-eager"],
        "old_flag": ["--old-flag"],
        "internal_only": [],
        "spec_method": ["--spec-method", "-sm"],
    }
    assert facts["engine_cli_only"] == {"enable_log_requests": ["--enable-log-requests"]}
    assert facts["frontend_args"] == {
        "tool_call_parser": ["-tcp", "--tool-call-parser"],
        "enable_auto_tool_choice": ["--enable-auto-tool-choice"],
        "host": ["--host"],
        "port": ["--port"],
        "api_server_count": ["--api-server-count", "-asc"],
    }
    assert facts["negatable_flags"] == ["--enable-auto-tool-choice", "--enable-log-requests", "--enforce-eager"]
    deprecated = facts["deprecated_flags"]
    assert sorted(deprecated) == ["--enforce-eager", "--kv-cache-dtype", "--old-flag"]  # not --compilation-config
    assert deprecated["--old-flag"]["removed_in"] == "9.12.0"  # help= given through a ** dict
    assert deprecated["--kv-cache-dtype"]["removed_in"] == "9.11"  # the config field's docstring
    assert deprecated["--enforce-eager"]["removed_in"] is None  # a warning that names no release
    assert facts["speculative"] == {
        "methods": ["deepseek_mtp", "dflash", "draft_model", "eagle", "eagle3", "gemma4_mtp", "mtp", "ngram"],
        "mtp_model_types": ["deepseek_mtp", "gemma4_mtp", "mtp"],
        "keys": ["method", "model", "num_speculative_tokens"],  # the ClassVar is no key
    }
    assert facts["kv_cache_dtypes"] == ["auto", "bfloat16", "fp8", "fp8_e4m3", "nvfp4"]
    assert facts["attention_backends"] == ["CUSTOM", "FLASH_ATTN", "TRITON_ATTN"]
    assert facts["env_vars"] == ["CUDA_HOME", "VLLM_HOST_IP", "VLLM_RPC_TIMEOUT"]
    assert facts["tool_parsers"] == ["gemma4", "hermes", "llama3_json", "llama4_json"]  # not the docstring's
    assert facts["reasoning_parsers"] == ["deepseek_r1", "gemma4"]
    assert facts["sources"]["frontend"] == "vllm/entrypoints/common/cli_args.py"
    assert facts["counts"]["engine_args"] == 8
    assert text == json.dumps(facts, indent=1, sort_keys=True) + "\n"
    assert run(tmp_path, wheel, capsys)[2].read_text() == text  # byte-stable on a rerun


@pytest.mark.parametrize("where", ["vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/launchers/cli_args.py"])
def test_frontend_found_where_older_releases_kept_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    wheel = make_wheel(tmp_path, rename=("vllm/entrypoints/common/cli_args.py", where))
    code, err, target = run(tmp_path, wheel, capsys)
    assert code == 0, err
    facts = json.loads(target.read_text())
    assert facts["sources"]["frontend"] == where and "host" in facts["frontend_args"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"drop": "vllm/engine/arg_utils.py"}, "vllm/engine/arg_utils.py"),
        ({"replace": {"vllm/config/cache.py": "CacheDType = (\n"}}, "vllm/config/cache.py:"),
        ({"replace": {"vllm/envs.py": "environment_variables = build()\n"}}, "vllm/envs.py: no environment_variables"),
    ],
)
def test_unreadable_release_names_the_file_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], named: str
) -> None:
    code, err, target = run(tmp_path, make_wheel(tmp_path, **change), capsys)
    assert code == 1
    assert "error: 9.9.0: " in err and named in err and "Traceback" not in err
    assert not target.parent.exists() or not list(target.parent.iterdir())


def test_newest_patch_per_minor_skips_prereleases() -> None:
    versions = ["0.33.0", "0.34.0rc1", "0.27.1", "0.27.0", "0.10.1.1", "0.10.1", "0.8.5.post1", "0.8.5"]
    assert wheel_cache.newest_per_minor(versions) == {
        "0.33": "0.33.0",
        "0.27": "0.27.1",
        "0.10": "0.10.1.1",
        "0.8": "0.8.5.post1",
    }


def test_exact_versions_need_no_index() -> None:
    assert vllm_surface.resolve(["0.21.0", "0.33.0"]) == ["0.21.0", "0.33.0"]


# ---- the committed data, produced from the PyPI wheels ----


def committed() -> dict[str, dict[str, Any]]:
    return {p.stem.removeprefix("vllm-"): json.loads(p.read_text()) for p in sorted(GENERATED.glob("vllm-*.json"))}


def all_flags(facts: dict[str, Any]) -> set[str]:
    tables = ("engine_args", "engine_cli_only", "frontend_args")
    return {flag for table in tables for flags in facts[table].values() for flag in flags}


def test_committed_releases_are_well_formed() -> None:
    data = committed()
    assert sorted(data, key=lambda m: int(m.split(".")[1])) == [f"0.{n}" for n in range(20, 35)]
    for minor, facts in data.items():
        path = GENERATED / f"vllm-{minor}.json"
        assert path.read_text() == json.dumps(facts, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        artifact = facts["artifact"]
        assert vllm_surface.minor_of(artifact["version"]) == minor
        assert artifact["file"].startswith(f"vllm-{artifact['version']}-") and artifact["file"].endswith(".whl")
        assert re.fullmatch(r"[0-9a-f]{64}", artifact["sha256"])
        assert facts["written_by"] == {
            "tool": "olarespack releases refresh",
            "command": f"olarespack releases refresh --engine vllm {artifact['version']}",
        }
        assert facts["counts"] == vllm_surface.counts(facts)
        for table in ("engine_args", "engine_cli_only", "frontend_args"):
            assert all(isinstance(f, str) and f.startswith("-") for fl in facts[table].values() for f in fl)
        assert set(facts["deprecated_flags"]) <= all_flags(facts)


def test_committed_facts_agree_with_the_engine_notes() -> None:
    data = committed()
    old, new = data["0.21"], data["0.33"]
    assert (old["counts"]["engine_args"], new["counts"]["engine_args"]) == (200, 259)
    assert (old["counts"]["tool_parsers"], new["counts"]["tool_parsers"]) == (41, 58)
    assert (old["counts"]["reasoning_parsers"], new["counts"]["reasoning_parsers"]) == (25, 42)
    assert (old["counts"]["attention_backends"], new["counts"]["attention_backends"]) == (25, 50)
    assert new["counts"]["kv_cache_dtypes"] == 22
    assert "minimax" in old["tool_parsers"] and "minimax" not in new["tool_parsers"]
    assert "gemma4" in new["tool_parsers"] and "gemma4" in new["reasoning_parsers"]
    for method in ("medusa", "mlp_speculator"):
        assert method in old["speculative"]["methods"] and method not in new["speculative"]["methods"]
    assert {"mtp", "dflash", "dspark"} <= set(new["speculative"]["methods"])
    gone = {
        "--calculate-kv-scales",
        "--max-num-partial-prefills",
        "--max-long-partial-prefills",
        "--override-attention-dtype",
    }
    assert gone <= all_flags(old) and not gone & all_flags(new)
    assert {"--spec-method", "--spec-model", "--spec-tokens"} <= all_flags(new) - all_flags(old)
    assert new["engine_args"]["gpu_memory_utilization"] == ["--gpu-memory-utilization", "--device-memory-utilization"]
    assert old["deprecated_flags"]["--calculate-kv-scales"]["removed_in"] == "0.19"
    assert new["deprecated_flags"]["--ir-op-priority"]["removed_in"] == "0.34.0"
    assert new["deprecated_flags"]["--log-config-file"]["removed_in"] == "0.33.0"
    assert old["sources"]["frontend"] == "vllm/entrypoints/openai/cli_args.py"
    assert new["sources"]["frontend"] == "vllm/entrypoints/common/cli_args.py"
    assert {"--grpc-port", "--tool-strict-level", "--sse-keep-alive-interval"} <= all_flags(new) - all_flags(old)
    assert "VLLM_RPC_TIMEOUT" in old["env_vars"] and "VLLM_RPC_TIMEOUT" not in new["env_vars"]
    assert "VLLM_ENABLE_STARTUP_PLAN" in new["env_vars"]


def test_a_wheel_whose_sources_unpack_past_their_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel is a zip: one .py member that unpacks to gigabytes was read whole into memory."""
    import zipfile

    from olarespack.engines.vllm.tables import wheels

    monkeypatch.setattr(wheels, "MAX_SOURCE_BYTES", 1 << 20)
    wheel = tmp_path / "vllm-0.99.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("vllm/__init__.py", "")
        out.writestr("vllm/engine/arg_utils.py", " " * (2 << 20))
    with pytest.raises(wheels.FetchError, match=r"vllm/engine/arg_utils\.py unpacks past 1 MiB"):
        wheels.slim_wheel(wheel, tmp_path / "cache", "vllm", "0.99.0")
    assert not list((tmp_path / "cache").glob("*.zip"))
