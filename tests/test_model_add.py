"""`olarespack model add` and the project's models/ folder as users meet them: real files on disk, a real
GGUF file written with gguf.GGUFWriter, the CLI through its entry point."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import yaml

from conftest import APPS, run_cli
from olarespack.core.errors import ModelDataError, UnknownModelError
from olarespack.fit.budget import fit_report, resolve_context
from olarespack.models import arch, folder, registry
from olarespack.models import hf_config as hf_reader
from olarespack.models.gguf_file import hf_config, read_gguf
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

FIXTURES = Path(__file__).parent / "fixtures"
CONFIG = FIXTURES / "gemma4-26b-a4b-config.json"
VLLM_REPO = "someone/gemma-4-26B-A4B-finetune"
GGUF_REPO = "someone/tiny-gemma-4-GGUF"
GGUF_FILE, MMPROJ = "tiny-gemma-4-Q4_K_M.gguf", "mmproj-tiny-BF16.gguf"
E4B_LAYERS = 42


def vllm_project(tmp_path: Path) -> Path:
    """apps/app.yaml: the vision app on a model olarespack does not ship (no drafter, calibration or parser)."""
    data = app_data("gemma4-vision")
    data["engine"]["model"] = VLLM_REPO
    for key in ("speculative", "calibration", "tool_call_parser"):
        data["engine"].pop(key, None)
    (tmp_path / "apps").mkdir()
    return write_spec(tmp_path / "apps", data)


def gguf_project(tmp_path: Path) -> Path:
    """apps/app.yaml: the audio app on a GGUF repository olarespack does not ship."""
    data = app_data("gemma4-audio")
    model = data["engine"]["model"]
    model.update(repo=GGUF_REPO, file=GGUF_FILE, mmproj=MMPROJ)
    model.pop("saved_as", None)
    model.pop("folder", None)
    (tmp_path / "apps").mkdir()
    return write_spec(tmp_path / "apps", data)


def write_gguf(path: Path, arch_name: str = "gemma4", **meta: Any) -> Path:
    """A small real GGUF file: Gemma 4 E4B's attention metadata (llama.cpp keys) over tiny tensors."""
    writer = gguf.GGUFWriter(str(path), arch_name)
    if arch_name != "clip":
        n = meta.get("layers", E4B_LAYERS)
        writer.add_block_count(n)
        writer.add_context_length(131072)
        writer.add_embedding_length(2560)
        writer.add_feed_forward_length(10240)
        writer.add_head_count(8)
        writer.add_head_count_kv(2)
        writer.add_key_length(512)  # full-attention layers
        writer.add_value_length(512)
        writer.add_key_length_swa(256)  # sliding layers
        writer.add_value_length_swa(256)
        writer.add_sliding_window(512)
        writer.add_sliding_window_pattern(meta.get("pattern", [(i + 1) % 6 != 0 for i in range(n)]))
        writer.add_shared_kv_layers(18)
        writer.add_embedding_length_per_layer_input(256)
        writer.add_token_list([f"t{i}" for i in range(300)])
        writer.add_vocab_size(262144)
        writer.add_tensor("per_layer_token_embd.weight", np.zeros((300, 64), dtype=np.float16))
    writer.add_tensor("token_embd.weight", np.zeros((300, 32), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def model_file(project: Path) -> dict[str, Any]:
    files = sorted((project / "models").glob("*.yaml"))
    assert len(files) == 1, files
    data: dict[str, Any] = yaml.safe_load(files[0].read_text(encoding="utf-8"))
    return data


def clean(out: str) -> None:
    assert "Traceback" not in out and "internal error" not in out, out


# --------------------------------------------------------------------------- vLLM: config.json


def test_unknown_model_exits_5_with_the_command_then_add_makes_fit_work(tmp_path: Path) -> None:
    spec = vllm_project(tmp_path)
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml")
    assert code == 5, out
    assert f"`olarespack model add {VLLM_REPO} --config config.json --weights-bytes N`" in out
    clean(out)

    code, out = run_cli(
        tmp_path,
        "model",
        "add",
        VLLM_REPO,
        "--config",
        str(CONFIG),
        "--weights-bytes",
        "17500000000",
        "--drafter-for",
        "google/gemma-4-26B-A4B-it",
    )
    assert code == 0, out
    assert out.startswith("created models/gemma-4-26b-a4b-finetune.yaml")
    data = model_file(tmp_path)
    assert data["repo"] == VLLM_REPO and data["family"] == "gemma4" and data["kv"] == "own"
    assert data["weights"] == {"bytes": 17_500_000_000, "exact": False}
    assert data["drafter_for"] == ["google/gemma-4-26B-A4B-it"]
    digest = hashlib.sha256(CONFIG.read_bytes()).hexdigest()
    assert any(f"{CONFIG.name} sha256:{digest}" in s for s in data["sources"])
    assert any(s.startswith("written by: olarespack model add") for s in data["sources"])
    assert str(FIXTURES) not in json.dumps(data)  # file names only: no local paths in a shared repository
    # the kept config reads as the whole config.json
    assert hf_reader.arch_from_hf_config(data["config"]) == hf_reader.load_hf_config(CONFIG)

    code, out = run_cli(tmp_path, "fit", "apps/app.yaml", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["model"] == VLLM_REPO and report["fits"]
    # the same budget as the shipped model of the same architecture and size
    shipped = fit_report(
        load_spec(spec).model_copy(
            update={
                "engine": load_spec(spec).engine.model_copy(update={"model": "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"})
            }
        )
    )
    assert report["kv_cache_needed_bytes"] == shipped.kv_cache_needed_bytes
    info = registry.models_for(spec)[VLLM_REPO]
    assert info.family == "gemma4" and info.drafter_for == ("google/gemma-4-26B-A4B-it",)

    code, out = run_cli(tmp_path, "model", "add", VLLM_REPO, "--config", str(CONFIG), "--weights-bytes", "1")
    assert code == 2 and "--force" in out
    code, out = run_cli(tmp_path, "model", "add", VLLM_REPO, "--config", str(CONFIG), "--weights-bytes", "1", "--force")
    assert code == 0 and out.startswith("updated models/gemma-4-26b-a4b-finetune.yaml"), out
    assert model_file(tmp_path)["weights"]["bytes"] == 1


def test_safetensors_index_gives_the_exact_size(tmp_path: Path) -> None:
    vllm_project(tmp_path)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 17_123_456_789}, "weight_map": {}}), encoding="utf-8")
    code, out = run_cli(tmp_path, "model", "add", VLLM_REPO, "--config", str(CONFIG), "--safetensors-index", str(index))
    assert code == 0, out
    assert model_file(tmp_path)["weights"] == {"bytes": 17_123_456_789, "exact": True}
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml", "--json")
    assert code == 0 and json.loads(out)["weights_bytes"] == 17_123_456_789, out

    index.write_text(json.dumps({"metadata": {}}), encoding="utf-8")
    code, out = run_cli(
        tmp_path, "model", "add", "someone/other", "--config", str(CONFIG), "--safetensors-index", str(index)
    )
    assert code == 1 and "metadata.total_size" in out
    clean(out)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--config", str(CONFIG)],
        ["--config", str(CONFIG), "--weights-bytes", "5", "--safetensors-index", str(CONFIG)],
        ["--config", str(CONFIG), "--gguf", str(CONFIG)],
        ["--gguf", str(CONFIG), "--weights-bytes", "5"],
    ],
    ids=["nothing", "no-size", "two-sizes", "config-and-gguf", "gguf-with-size"],
)
def test_add_usage_errors(tmp_path: Path, args: list[str]) -> None:
    code, out = run_cli(tmp_path, "model", "add", VLLM_REPO, *args)
    assert code == 2, out
    clean(out)
    assert not (tmp_path / "models").exists()


def test_repo_must_be_a_hugging_face_repository(tmp_path: Path) -> None:
    code, out = run_cli(tmp_path, "model", "add", "../etc/passwd", "--config", str(CONFIG), "--weights-bytes", "1")
    assert code == 2 and "not a Hugging Face repository" in out


# --------------------------------------------------------------------------- llama.cpp: GGUF


def test_gguf_header_maps_to_hugging_face_config_names(tmp_path: Path) -> None:
    header = read_gguf(write_gguf(tmp_path / GGUF_FILE))
    assert header.architecture == "gemma4" and not header.projector
    assert header.bytes == (tmp_path / GGUF_FILE).stat().st_size
    # token_embd and per_layer_token_embd stay on the host; no output.weight, so token_embd is the tied output
    assert header.host_bytes == 300 * 32 * 2 + 300 * 64 * 2 and header.gpu_copy_bytes == 300 * 32 * 2
    assert (header.config or {})["hidden_size_per_layer_input"] == 256
    # the same architecture as the shipped Gemma 4 E4B (read from its config.json fields)
    assert hf_reader.arch_from_hf_config(header.config or {}) == registry.models()["unsloth/gemma-4-E4B-it-GGUF"].arch


def test_gguf_add_then_fit(tmp_path: Path) -> None:
    gguf_project(tmp_path)
    model = write_gguf(tmp_path / GGUF_FILE)
    mmproj = write_gguf(tmp_path / MMPROJ, "clip")
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml")
    assert code == 5, out
    assert f"`olarespack model add {GGUF_REPO} --gguf {GGUF_FILE} --gguf {MMPROJ}`" in out
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml", "--config", str(CONFIG), "--weights-bytes", "1")
    assert code == 2 and "--gguf" in out, out

    code, out = run_cli(tmp_path, "model", "add", GGUF_REPO, "--gguf", str(model), "--gguf", str(mmproj))
    assert code == 0 and out.startswith("created models/tiny-gemma-4-gguf.yaml"), out
    data = model_file(tmp_path)
    assert data["family"] == "gemma4"
    assert data["files"][GGUF_FILE] == {
        "bytes": model.stat().st_size,
        "exact": True,
        "host_bytes": 300 * 32 * 2 + 300 * 64 * 2,
        "host_exact": True,
        "gpu_copy_bytes": 300 * 32 * 2,
    }
    made = registry.model_from_data("made", data).arch
    assert made == registry.models()["unsloth/gemma-4-E4B-it-GGUF"].arch and made is not None
    assert made.per_layer_input_size == 256
    assert data["files"][MMPROJ] == {"bytes": mmproj.stat().st_size, "exact": True}
    assert data["config"]["layer_types"].count("full_attention") == 7
    assert any(read_gguf(model).sha256 in s for s in data["sources"])

    code, out = run_cli(tmp_path, "fit", "apps/app.yaml", "--json")
    assert code == 0, out
    report = json.loads(out)
    shipped = fit_report(load_spec(APPS / "gemma4-audio.yaml"))
    assert report["kv_cache_needed_bytes"] == shipped.kv_cache_needed_bytes  # same layers, same context
    assert report["weights_exact"] is True
    # the per-layer inputs count in the compute estimate as they do for the shipped E4B
    assert report["overhead_bytes"] == shipped.overhead_bytes

    # fit reads GGUF files directly too, without a models/ file
    (tmp_path / "models" / "tiny-gemma-4-gguf.yaml").unlink()
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml", "--gguf", str(model), "--gguf", str(mmproj), "--json")
    assert code == 0 and json.loads(out)["kv_cache_needed_bytes"] == shipped.kv_cache_needed_bytes, out


def test_files_that_are_not_gguf_are_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"<html>not found</html>" * 10)
    code, out = run_cli(tmp_path, "model", "add", GGUF_REPO, "--gguf", str(fake))
    assert code == 1 and "not a GGUF file" in out, out
    clean(out)
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(write_gguf(tmp_path / "whole.gguf").read_bytes()[:200])
    code, out = run_cli(tmp_path, "model", "add", GGUF_REPO, "--gguf", str(truncated))
    assert code == 1 and "cut.gguf" in out, out
    clean(out)
    mmproj = write_gguf(tmp_path / MMPROJ, "clip")
    code, out = run_cli(tmp_path, "model", "add", GGUF_REPO, "--gguf", str(mmproj))
    assert code == 2 and "projector" in out, out


def test_gguf_sliding_patterns_as_llama_cpp_reads_them() -> None:
    def meta(values: dict[str, Any]) -> Any:
        return lambda key: values.get(key)

    base = {
        "gemma3.block_count": 12,
        "gemma3.attention.head_count": 8,
        "gemma3.attention.head_count_kv": 4,
        "gemma3.embedding_length": 1024,
        "gemma3.attention.sliding_window": 512,
    }
    config, notes = hf_config("gemma3", meta(base))  # no pattern key: llama.cpp's built-in period 6
    assert config["layer_types"][4:6] == ["sliding_attention", "full_attention"] and notes
    config, _ = hf_config("gemma3", meta({**base, "gemma3.attention.sliding_window_pattern": 3}))
    assert config["layer_types"].count("full_attention") == 4
    config, notes = hf_config("mystery", meta({k.replace("gemma3", "mystery"): v for k, v in base.items()}))
    assert "layer_types" not in config and "over-estimate" in notes[0]  # unknown: all full, never too small
    assert config["head_dim"] == 128  # embedding_length / head_count
    with pytest.raises(ModelDataError, match="kv_lora_rank"):
        hf_config("deepseek2", meta({"deepseek2.block_count": 2, "deepseek2.attention.kv_lora_rank": 512}))
    with pytest.raises(ModelDataError, match="without KV heads"):
        hf_config(
            "jamba",
            meta(
                {
                    "jamba.block_count": 2,
                    "jamba.attention.head_count": 8,
                    "jamba.attention.head_count_kv": [0, 8],
                    "jamba.embedding_length": 64,
                }
            ),
        )


# --------------------------------------------------------------------------- the project's models/ folder


SHIPPED = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"


def shipped_copy(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (Path(arch.__file__).parent.parent / "data/models/gemma-4-26b-a4b-it-awq-4bit.yaml").read_text("utf-8")
    )
    data.update(changes)
    return data


def test_a_project_file_overrides_the_shipped_one(tmp_path: Path) -> None:
    data = app_data("gemma4-vision")
    (tmp_path / "apps").mkdir()
    spec = write_spec(tmp_path / "apps", data)
    (tmp_path / "models").mkdir()
    mine = tmp_path / "models" / "mine.yaml"
    mine.write_text(yaml.safe_dump(shipped_copy(weights={"bytes": 16_000_000_000, "exact": True})), "utf-8")
    assert registry.models_for(spec)[SHIPPED].weights_bytes == 16_000_000_000
    assert registry.models()[SHIPPED].weights_bytes == 17_500_000_000
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml", "--json")
    assert code == 0 and json.loads(out)["weights_bytes"] == 16_000_000_000, out
    # a change on disk is seen at once (the cache keys on size and mtime)
    mine.write_text(yaml.safe_dump(shipped_copy(weights={"bytes": 15_000_000_000, "exact": True})), "utf-8")
    os.utime(mine, ns=(1, 1))
    assert registry.models_for(spec)[SHIPPED].weights_bytes == 15_000_000_000
    assert registry.models_for(None)[SHIPPED].weights_bytes == 17_500_000_000


HOSTILE: list[tuple[str, str | bytes, str]] = [
    ("huge.yaml", b"# padding\n" * 120_000, "larger than"),
    ("bad.yaml", "repo: [unclosed\n", "invalid YAML"),
    ("anchors.yaml", "repo: &a x/y\ntitle: *a\nsources: [s]\n", "anchors"),
    ("types.yaml", yaml.safe_dump(shipped_copy(weights={"bytes": "lots", "exact": True})), "weights.bytes"),
    ("unknown.yaml", yaml.safe_dump(shipped_copy(colour="red")), "colour: unknown key"),
    ("layers.yaml", yaml.safe_dump(shipped_copy(config={"num_hidden_layers": 10**9})), "num_hidden_layers"),
    ("repo.yaml", yaml.safe_dump(shipped_copy(repo="../../etc")), "repo"),
    ("list.yaml", "- a\n- b\n", "YAML mapping"),
    ("latin1.yaml", "title: caf\xe9\n".encode("latin-1"), "not UTF-8"),
]


@pytest.mark.parametrize(("name", "content", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_model_files_are_named_and_refused(
    tmp_path: Path, name: str, content: str | bytes, message: str
) -> None:
    spec = vllm_project(tmp_path)
    (tmp_path / "models").mkdir()
    path = tmp_path / "models" / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ModelDataError, match=message) as caught:
        registry.models_for(spec)
    assert name in str(caught.value)
    code, out = run_cli(tmp_path, "fit", "apps/app.yaml")
    assert code == 1 and name in out, out
    clean(out)
    # build and lint report it as the project's input error, with its rule
    _, problems = resolve_context(str(spec), load_spec(spec))
    assert [p.rule for p in problems] == ["model-data"] and problems[0].severity == "error"


def test_folder_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for i in range(3):
        (models / f"m{i}.yaml").write_text(yaml.safe_dump(shipped_copy(repo=f"someone/m{i}")), "utf-8")
    assert len(folder.project_models(models)) == 3
    monkeypatch.setattr(folder, "MAX_FILES", 2)
    with pytest.raises(ModelDataError, match="more than 2 model files"):
        folder.project_models(models)
    monkeypatch.setattr(folder, "MAX_FILES", 1000)
    (models / "twin.yaml").write_text(yaml.safe_dump(shipped_copy(repo="someone/m0")), "utf-8")
    with pytest.raises(ModelDataError, match=r"also in m0\.yaml"):
        folder.project_models(models)
    (models / "twin.yaml").unlink()
    (models / "link.yaml").symlink_to(models / "m0.yaml")
    with pytest.raises(ModelDataError, match="symbolic link"):
        folder.project_models(models)


def test_unknown_model_error_names_repo_and_command() -> None:
    with pytest.raises(UnknownModelError) as caught:
        registry.find_model("someone/new-GGUF", {})
    assert caught.value.exit_code == 5 and caught.value.repo == "someone/new-GGUF"
    assert caught.value.command == "olarespack model add someone/new-GGUF --gguf <file>.gguf"
    assert "someone/new-GGUF" in str(caught.value) and caught.value.command in str(caught.value)


def test_shipped_drafters_name_their_targets() -> None:
    shipped = registry.models()
    for drafter in ("google/gemma-4-26B-A4B-it-assistant", "z-lab/gemma-4-26B-A4B-it-DFlash"):
        assert set(shipped[drafter].drafter_for) == {"google/gemma-4-26B-A4B-it", SHIPPED}
    assert shipped[SHIPPED].family == "gemma4" and shipped["unsloth/gemma-4-E4B-it-GGUF"].family == "gemma4"


def test_a_config_with_per_layer_inputs_keeps_them(tmp_path: Path) -> None:
    """A Gemma 4 E-model's config.json: the per-layer input width is one of the fields kept."""
    shipped = registry.models()["unsloth/gemma-4-E4B-it-GGUF"]
    text = yaml.safe_load((Path(arch.__file__).parent.parent / "data/models/gemma-4-e4b-it-gguf.yaml").read_text())
    config = tmp_path / "config.json"
    config.write_text(json.dumps(text["config"]), encoding="utf-8")
    (tmp_path / "apps").mkdir()
    code, out = run_cli(
        tmp_path, "model", "add", "someone/gemma-4-E4B-it", "--config", str(config), "--weights-bytes", "1000"
    )
    assert code == 0, out
    data = model_file(tmp_path)
    assert data["config"]["text_config"]["hidden_size_per_layer_input"] == 256
    assert hf_reader.arch_from_hf_config(data["config"]) == shipped.arch
