from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from olarespack.core.errors import ModelDataError
from olarespack.models import hf_config, registry
from olarespack.models.arch import KvLayer
from olarespack.models.hf_config import arch_from_hf_config, load_hf_config
from olarespack.models.registry import find_model, models

FIXTURES = Path(__file__).parent / "fixtures"
GEMMA4_26B = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"
GEMMA4_FULL_LAYERS = {5, 11, 17, 23, 29}


def test_shipped_gemma4_26b_has_the_documented_layers() -> None:
    model = models()[GEMMA4_26B]
    assert model.arch is not None
    layers = model.arch.layers
    assert len(layers) == 30
    for i, layer in enumerate(layers):
        if i in GEMMA4_FULL_LAYERS:
            assert layer == KvLayer("full", 2, 512)
        else:
            assert layer == KvLayer("sliding", 8, 256, 1024)
    assert model.arch.max_position_embeddings == 262144
    assert not model.weights_exact and model.kv == "own"


def test_local_config_json_reads_like_the_shipped_data() -> None:
    local = load_hf_config(FIXTURES / "gemma4-26b-a4b-config.json")
    assert local == models()[GEMMA4_26B].arch


def test_e4b_owns_kv_in_24_of_42_layers() -> None:
    model = models()["unsloth/gemma-4-E4B-it-GGUF"]
    assert model.arch is not None
    layers = model.arch.layers
    assert model.arch.num_hidden_layers == 42 and len(layers) == 24
    full = [layer for layer in layers if layer.kind == "full"]
    sliding = [layer for layer in layers if layer.kind == "sliding"]
    assert full == [KvLayer("full", 2, 512)] * 4  # num_global_key_value_heads null -> num_key_value_heads
    assert sliding == [KvLayer("sliding", 2, 256, 512)] * 20
    assert model.arch.kv_bytes_per_token(2, "full") == 16 * 1024
    files = model.files
    assert files["gemma-4-E4B-it-Q4_K_M.gguf"].bytes == 4_977_171_584
    assert files["mmproj-BF16.gguf"].bytes == 991_552_448


def test_drafters() -> None:
    dflash = models()["z-lab/gemma-4-26B-A4B-it-DFlash"]
    assert dflash.arch is not None and dflash.kv == "own"
    assert dflash.arch.layers == (KvLayer("full", 8, 128),) * 5
    assert dflash.arch.kv_bytes_per_token(1) == 10 * 1024  # "about 10 KiB per token at fp8"
    mtp = models()["google/gemma-4-26B-A4B-it-assistant"]
    assert mtp.arch is None and mtp.kv == "shared"
    assert 800_000_000 < mtp.weights_bytes < 900_000_000


def _cfg(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64}
    base.update(fields)
    return base


def test_text_config_wins_and_the_top_level_fills_gaps() -> None:
    model = arch_from_hf_config(
        {"max_position_embeddings": 4096, "num_hidden_layers": 99, "text_config": _cfg(num_hidden_layers=3)}
    )
    assert model.num_hidden_layers == 3 and len(model.layers) == 3
    assert model.max_position_embeddings == 4096


def test_sliding_window_pattern_marks_every_nth_layer_full() -> None:
    model = arch_from_hf_config(_cfg(num_hidden_layers=12, sliding_window=4096, sliding_window_pattern=6))
    assert [i for i, layer in enumerate(model.layers) if layer.kind == "full"] == [5, 11]
    assert all(layer.window == 4096 for layer in model.layers if layer.kind == "sliding")


def test_layer_types_override_the_pattern() -> None:
    types = ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    model = arch_from_hf_config(_cfg(layer_types=types, sliding_window=128, sliding_window_pattern=2))
    assert [layer.kind for layer in model.layers] == ["full", "sliding", "sliding", "full"]


def test_window_without_layer_types_slides_everywhere_and_none_means_full() -> None:
    assert {layer.kind for layer in arch_from_hf_config(_cfg(sliding_window=4096)).layers} == {"sliding"}
    assert {layer.kind for layer in arch_from_hf_config(_cfg(sliding_window=None)).layers} == {"full"}


def test_qwen2_style_sliding_switch() -> None:
    off = arch_from_hf_config(_cfg(sliding_window=4096, use_sliding_window=False, max_window_layers=2))
    assert {layer.kind for layer in off.layers} == {"full"}
    on = arch_from_hf_config(_cfg(sliding_window=4096, use_sliding_window=True, max_window_layers=2))
    assert [layer.kind for layer in on.layers] == ["full", "full", "sliding", "sliding"]


def test_defaults_derive_head_dim_and_kv_heads() -> None:
    model = arch_from_hf_config(
        {
            "num_hidden_layers": 2,
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "torch_dtype": "float32",
            "intermediate_size": [100, 300, 200],
        }
    )
    assert model.layers == (KvLayer("full", 16, 64),) * 2
    assert model.dtype_bytes == 4 and model.intermediate_size == 300


def test_kv_shared_layers_own_no_cache() -> None:
    model = arch_from_hf_config(_cfg(num_hidden_layers=6, num_kv_shared_layers=2))
    assert len(model.layers) == 4 and model.num_hidden_layers == 6


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_hidden_layers": None}, "num_hidden_layers"),
        ({"num_hidden_layers": "30"}, "expected an integer"),
        ({"num_hidden_layers": True}, "expected an integer"),
        ({"layer_types": ["full_attention"]}, "expected 4 entries"),
        ({"layer_types": ["full_attention"] * 3 + ["linear_attention"]}, "linear_attention"),
        ({"layer_types": ["sliding_attention"] * 4}, "sliding layers need a window"),
        ({"sliding_window_pattern": 0, "sliding_window": 8}, "sliding_window_pattern"),
        ({"num_kv_shared_layers": 4}, "num_kv_shared_layers"),
        ({"num_key_value_heads": None, "num_attention_heads": None, "head_dim": None}, "head_dim"),
    ],
)
def test_configs_it_cannot_read_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelDataError, match=message):
        arch_from_hf_config(_cfg(**fields))


def test_load_hf_config_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ModelDataError, match="cannot read"):
        load_hf_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ModelDataError, match="invalid JSON"):
        load_hf_config(bad)
    bad.write_text("[]", encoding="utf-8")
    with pytest.raises(ModelDataError, match="JSON object"):
        load_hf_config(bad)
    bad.write_text('{"num_hidden_layers": 0}', encoding="utf-8")
    with pytest.raises(ModelDataError, match=r"bad\.json: config field num_hidden_layers"):
        load_hf_config(bad)


def test_model_from_hf_config_and_find_model() -> None:
    info = hf_config.model_from_hf_config(FIXTURES / "gemma4-26b-a4b-config.json", repo="me/gemma", weights_bytes=123)
    assert info.weights_bytes == 123 and info.arch is not None and len(info.arch.layers) == 30
    assert find_model("me/gemma", {"me/gemma": info}) is info
    with pytest.raises(ModelDataError, match=r"no architecture data for 'me/other'.*known: me/gemma"):
        find_model("me/other", {"me/gemma": info})
    assert find_model(GEMMA4_26B) is models()[GEMMA4_26B]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "repo: a/b\ntitle: t\nkv: shared\nconfig: {num_hidden_layers: 1, head_dim: 8, num_key_value_heads: 1}\n"
            "sources: [s]\n",
            "exactly when kv is own",
        ),
        ("repo: a/b\ntitle: t\nkv: own\nsources: [s]\n", "exactly when kv is own"),
        ("repo: a/b\ntitle: t\nunknown: 1\nsources: [s]\n", "unknown"),
        ("repo: a/b\ntitle: t\nconfig: {num_hidden_layers: 0}\nsources: [s]\n", "num_hidden_layers"),
    ],
)
def test_model_files_are_validated(text: str, message: str) -> None:
    with pytest.raises(ModelDataError, match=message):
        registry._model_info("x.yaml", text)
