"""What `model add` and the models/ readers take from the user's files is bounded and checked: a named pipe
is refused rather than waited on, and a config whose counts are 0 (no KV heads, no head size, no layers) is
refused where it is read, naming the file and the field, instead of dividing by zero later in fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import yaml

from conftest import run_cli
from olarespack.core.errors import ModelDataError
from olarespack.fit.budget import resolve_context
from olarespack.models import arch, localfile, registry
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

CONFIG = Path(__file__).parent / "fixtures" / "gemma4-26b-a4b-config.json"
REPO = "someone/gemma-4-26B-A4B-finetune"
SHIPPED = Path(arch.__file__).parent.parent / "data/models/gemma-4-26b-a4b-it-awq-4bit.yaml"


def project(tmp_path: Path) -> Path:
    data = app_data("gemma4-vision")
    data["engine"]["model"] = REPO
    for key in ("speculative", "calibration", "tool_call_parser"):
        data["engine"].pop(key, None)
    (tmp_path / "apps").mkdir()
    return write_spec(tmp_path / "apps", data)


def olarespack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, so a read that blocks fails the test by its timeout instead of hanging it."""
    code = "import sys; from olarespack.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_named_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    pipe = tmp_path / "config.json"
    os.mkfifo(pipe)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 10**9}}), encoding="utf-8")
    for args in (
        ["--config", str(pipe), "--weights-bytes", "1"],
        ["--config", str(CONFIG), "--safetensors-index", str(pipe)],
        ["--gguf", str(pipe)],
    ):
        out = olarespack(tmp_path, "model", "add", REPO, *args)
        assert out.returncode == 1, out
        assert f"{pipe}: not a regular file" in out.stderr and "saved on disk" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
        assert not (tmp_path / "models").exists()


def test_an_oversized_index_is_refused_by_its_size(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(b" " * (localfile.MAX_CONFIG_FILE + 1))
    code, out = run_cli(tmp_path, "model", "add", REPO, "--config", str(CONFIG), "--safetensors-index", str(index))
    assert code == 1 and f"{index}: larger than 8 MiB" in out, out
    assert not (tmp_path / "models").exists()


def with_text(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(CONFIG.read_text(encoding="utf-8"))
    config["text_config"].update(changes)
    return config


ZEROS = [
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"head_dim": 0}, "head_dim"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    ({"intermediate_size": 0}, "intermediate_size"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"hidden_size": -5}, "hidden_size"),
    ({"head_dim": None, "hidden_size": 4, "num_attention_heads": 16}, "hidden_size / num_attention_heads"),
]


@pytest.mark.parametrize(("changes", "field"), ZEROS, ids=[f[1] + "=" + str(next(iter(f[0].values()))) for f in ZEROS])
def test_model_add_refuses_a_config_with_zero_counts(tmp_path: Path, changes: dict[str, Any], field: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(with_text(**changes)), encoding="utf-8")
    code, out = run_cli(tmp_path, "model", "add", REPO, "--config", str(config), "--weights-bytes", "1000")
    assert code == 1, out
    assert f"{config}: config field" in out and field in out, out
    assert "Traceback" not in out and "internal error" not in out
    assert not (tmp_path / "models").exists()


def test_a_project_model_file_with_zero_kv_heads_is_refused_by_fit_build_and_lint(tmp_path: Path) -> None:
    spec = project(tmp_path)
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    data["repo"] = REPO
    data["config"]["text_config"]["num_key_value_heads"] = 0
    (tmp_path / "models").mkdir()
    (tmp_path / "models/mine.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    expected = "models/mine.yaml: config: config field num_key_value_heads: 0, and a model has at least 1"
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml")
    assert code == 1 and expected in out, out
    _, problems = resolve_context(str(spec), load_spec(spec))  # what build and lint report
    assert [p.rule for p in problems] == ["model-data"] and expected in problems[0].message
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out = run_cli(tmp_path, "build", "--apps-dir", "apps", "--charts-dir", "charts")
    assert code == 1 and expected in out and "internal error" not in out, out
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_a_shipped_model_file_is_read_by_the_same_rule() -> None:
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    data["config"]["text_config"]["head_dim"] = 0
    with pytest.raises(ModelDataError, match=r"^data/models/x\.yaml: config: config field head_dim: 0"):
        registry._model_info("x.yaml", yaml.safe_dump(data))


def test_a_gguf_whose_head_size_comes_out_0_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "tiny-Q4_K_M.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_embedding_length(4)  # smaller than the head count: hidden_size // heads is 0
    writer.add_head_count(16)
    writer.add_head_count_kv(4)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    code, out = run_cli(tmp_path, "model", "add", "someone/tiny-GGUF", "--gguf", str(path))
    assert code == 1 and f"{path}: metadata llama.attention.key_length: needed" in out, out
    assert not (tmp_path / "models").exists()
