"""tools/engine_releases/vllm_argv_check.py: every vLLM app's server command line as the real `vllm serve`
parser of its release read it (the committed argv-check.json, written from the release wheels' sources),
and the tool's own pieces on a hand-written mini vLLM (no torch)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "engine_releases"))

import vllm_argv_check as tool  # noqa: E402

from olarespack.spec.load import load_spec  # noqa: E402

COMMITTED = json.loads(tool.OUT.read_text())
VLLM_APPS = {
    spec.name: path
    for path in sorted((ROOT / "apps").glob("*.yaml"))
    if (spec := load_spec(path)).engine.kind == "vllm"
}
CASES = [(name, which) for name in sorted(VLLM_APPS) for which in ("own", "moved")]

# A mini vLLM with the names the check reaches, each behaving as the real one does where the check looks.
MINI_VLLM = {
    "vllm/__init__.py": "",
    "vllm/platforms/__init__.py": "current_platform = None\n",
    "vllm/platforms/interface.py": """
import enum
from typing import NamedTuple

class PlatformEnum(enum.Enum):
    CUDA = 1
    UNSPECIFIED = 2

class DeviceCapability(NamedTuple):
    major: int
    minor: int

class Platform:
    _enum = PlatformEnum.UNSPECIFIED
    device_type = ""
""",
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": "import argparse\n\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n"
    "    pass\n",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": """
import json

class ServeSubcommand:
    name = "serve"

    @staticmethod
    def cmd(args):
        raise AssertionError("the check never serves")

    def validate(self, args):
        if args.enable_auto_tool_choice and not args.tool_call_parser:
            raise TypeError("--enable-auto-tool-choice requires --tool-call-parser")

    def subparser_init(self, subparsers):
        parser = subparsers.add_parser(self.name)
        parser.add_argument("model_tag", nargs="?")
        parser.add_argument("--max-model-len", type=int)
        parser.add_argument("--speculative-config", type=json.loads)
        parser.add_argument("--enable-auto-tool-choice", action="store_true")
        parser.add_argument("--tool-call-parser")
        return parser
""",
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
import logging
from dataclasses import dataclass

from vllm import platforms

logger = logging.getLogger("vllm.engine.arg_utils")

@dataclass
class AsyncEngineArgs:
    model: str
    max_model_len: int
    speculative_config: dict

    @classmethod
    def from_cli_args(cls, args):
        if platforms.current_platform.device_type != "cuda":
            raise RuntimeError("Failed to infer device type")
        if args.max_model_len is not None and args.max_model_len < 1:
            raise ValueError("max_model_len must be positive")
        if args.max_model_len == 12345:
            logger.warning("max_model_len %d is odd", args.max_model_len)
        return cls(args.model, args.max_model_len, args.speculative_config)
""",
    "vllm/config/__init__.py": """
from typing import Literal

from pydantic.dataclasses import dataclass

@dataclass
class SpeculativeConfig:
    method: Literal["mtp", "dflash"] | None = None
    model: str | None = None
    num_speculative_tokens: int | None = None
""",
}


def mini_cache(tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    cache.mkdir()
    with zipfile.ZipFile(cache / "vllm-9.9.0.sources.zip", "w") as archive:
        for name, text in MINI_VLLM.items():
            archive.writestr(name, text)
    (cache / "vllm-9.9.0.artifact.json").write_text(
        json.dumps({"file": "vllm-9.9.0.whl", "sha256": "ab" * 32, "size": 1, "version": "9.9.0"})
    )
    return cache


def test_each_argv_gets_what_the_release_says_of_it(tmp_path: Path) -> None:
    spec = '{"method":"mtp","model":"d/m","num_speculative_tokens":3}'
    argvs = {
        "ok": ["org/model", "--max-model-len", "4096", "--speculative-config", spec],
        "removed": ["org/model", "--calculate-kv-scales"],
        "serve": ["org/model", "--enable-auto-tool-choice"],
        "engine": ["org/model", "--max-model-len", "0"],
        "warned": ["org/model", "--max-model-len", "12345"],
        **{
            f"control/{name}": argv for name, argv in tool.controls(["org/model", "--speculative-config", spec]).items()
        },
    }
    found = tool.run_release("9.9.0", argvs, sys.executable, mini_cache(tmp_path))
    said = found["results"]
    assert found["artifact"]["sha256"] == "ab" * 32
    # engine args ok: the stand-in platform was in place (the mini refuses any device type but cuda)
    assert said["ok"] == {
        "parser": "ok",
        "model": "org/model",
        "engine_args": "ok",
        "speculative_config": "ok",
        "warnings": [],
    }
    assert said["removed"]["parser"] == "error"
    assert "unrecognized arguments: --calculate-kv-scales" in said["removed"]["error"]
    assert said["serve"]["error"] == "TypeError: --enable-auto-tool-choice requires --tool-call-parser"
    assert said["engine"]["engine_args"] == "ValueError: max_model_len must be positive"
    assert said["warned"]["warnings"] == ["max_model_len 12345 is odd"]
    assert said["control/removed_flag"]["parser"] == "error"
    problems = said["control/bad_speculative"]["speculative_config"]
    assert problems[0].startswith("method: Input should be 'mtp' or 'dflash'")
    assert problems[1] == f"{tool.BAD_KEY}: not a field of SpeculativeConfig"


def test_missing_sources_name_the_command_that_fetches_them(tmp_path: Path) -> None:
    with pytest.raises(
        SystemExit,
        match=r"vllm-0\.99\.0\.sources\.zip is missing: "
        r"run olarespack releases refresh --engine vllm .* 0\.99",
    ):
        tool.run_release("0.99.0", {"x": ["m"]}, sys.executable, tmp_path)


def test_the_move_drops_what_named_the_old_release() -> None:
    text = (ROOT / "apps" / "gemma4-dflash.yaml").read_text()
    import yaml

    before, after = yaml.safe_load(text), yaml.safe_load(tool.moved_text(text, tool.MOVED_IMAGE))
    assert before["engine"]["version"].startswith("0.20")
    assert after["engine"]["image"] == tool.MOVED_IMAGE
    assert "version" not in after["engine"] and "calibration" not in after["engine"]
    del before["engine"]["image"], before["engine"]["version"], after["engine"]["image"]
    assert after == before


def test_controls_without_a_speculative_config_only_add_the_removed_flag() -> None:
    assert tool.controls(["m", "--max-model-len", "8"]) == {
        "removed_flag": ["m", "--max-model-len", "8", tool.CONTROL_FLAG]
    }


def test_every_vllm_app_is_checked_at_its_release_and_moved() -> None:
    assert set(COMMITTED["apps"]) == set(VLLM_APPS)
    assert COMMITTED["moved_image"] == tool.MOVED_IMAGE
    for name, which in CASES:
        case = COMMITTED["apps"][name][which]
        table = json.loads((tool.OUT.parent / f"vllm-{case['table']}.json").read_text())
        # the parser ran from the very wheel the release table was read from
        assert COMMITTED["artifacts"][case["wheel"]] == table["artifact"], (name, which)
    assert {COMMITTED["apps"][name]["moved"]["wheel"] for name in VLLM_APPS} == {"0.33.0"}


@pytest.mark.parametrize(("name", "which"), CASES)
def test_the_release_parser_takes_the_argv(name: str, which: str) -> None:
    case = COMMITTED["apps"][name][which]
    assert case["parser"] == "ok", case.get("error")
    assert case["engine_args"] == "ok"
    assert case["speculative_config"] == "ok"
    assert case["model"] == case["argv"][0]


@pytest.mark.parametrize(("name", "which"), CASES)
def test_the_check_can_fail(name: str, which: str) -> None:
    """The same parsers refused a broken speculative config on every release, and the flag 0.33 removed there."""
    case = COMMITTED["apps"][name][which]
    assert any(p.startswith("method: ") for p in case["controls"]["bad_speculative"]["speculative_config"])
    removed = case["controls"]["removed_flag"]
    if case["wheel"] == "0.33.0":
        assert removed == {
            "parser": "error",
            "warnings": [],
            "error": f"vllm: error: unrecognized arguments: {tool.CONTROL_FLAG}",
        }
    else:  # still a flag before 0.33: the answer is the release's, not a list's
        assert removed["parser"] == "ok"


@pytest.mark.helm
@pytest.mark.parametrize(("name", "which"), CASES)
def test_the_checked_argv_is_what_the_app_runs_now(name: str, which: str) -> None:
    """The committed answers are about today's command lines: a change to what an app renders needs the
    check run again (docs/maintainers.md: Engine releases)."""
    path = VLLM_APPS[name]
    text = path.read_text()
    now = tool.rendered_case(f"apps/{path.name}", text if which == "own" else tool.moved_text(text, tool.MOVED_IMAGE))
    committed = COMMITTED["apps"][name][which]
    assert {key: committed[key] for key in now} == now, (
        "run `.venv/bin/python tools/engine_releases/vllm_argv_check.py --python <torch venv>/bin/python`"
    )
