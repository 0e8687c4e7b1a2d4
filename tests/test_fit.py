from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from conftest import APP_FILES
from olarespack.core.errors import ModelDataError, UsageError
from olarespack.core.hardware import profiles
from olarespack.core.units import cdiv, largest_fitting
from olarespack.engines.llamacpp import kv as llamacpp_kv
from olarespack.engines.llamacpp.kv import llamacpp_context, llamacpp_kv_bytes
from olarespack.engines.vllm import kv as vllm_kv
from olarespack.engines.vllm.kv import vllm_kv_layout, vllm_kv_needed, vllm_max_model_len
from olarespack.fit.budget import fit_report, resolve_context
from olarespack.models.arch import KvLayer, ModelArch, ModelInfo
from olarespack.models.registry import models
from olarespack.spec.load import load_spec
from olarespack.spec.models import AppSpec
from specs import app_data, write_spec

GiB = 1 << 30
MiB = 1 << 20

# Gemma 4 26B-A4B text config, typed from the issue (not read from the shipped data).
FULL = KvLayer("full", 2, 512)
SLIDING = KvLayer("sliding", 8, 256, 1024)
GEMMA4_26B = tuple(FULL if i in {5, 11, 17, 23, 29} else SLIDING for i in range(30))
FP8 = {"kv_dtype_bytes": 1}
E4B_REPO = "unsloth/gemma-4-E4B-it-GGUF"


def gemma4_closed_form(length: int, mnbt: int) -> int:
    """DOMAIN.md section 5: 327,680 x (cdiv(L, 32) + 5 x (cdiv(min(1023 + mnbt, L), 16) + 1))."""
    return 327_680 * (cdiv(length, 32) + 5 * (cdiv(min(1023 + mnbt, length), 16) + 1))


def load_app(name: str) -> AppSpec:
    return load_spec(Path(__file__).resolve().parents[1] / "apps" / f"{name}.yaml")


def changed_app(tmp_path: Path, name: str, **engine: Any) -> AppSpec:
    data = app_data(name)
    data["engine"].update(engine)
    return load_spec(write_spec(tmp_path, data))


# --------------------------------------------------------------------------- vLLM: the seed's numbers


def test_kv_needed_at_262144_is_what_vllm_printed() -> None:
    needed = vllm_kv_needed(GEMMA4_26B, 262144, max_num_batched_tokens=8192, **FP8)
    assert needed == 3_629_711_360
    assert f"{needed / GiB:.2f}" == "3.38"


def test_largest_fitting_length_is_vllms_estimate() -> None:
    def best(available: int) -> int:
        return vllm_max_model_len(GEMMA4_26B, available, max_model_len=262144, max_num_batched_tokens=8192, **FP8)

    assert best(3_030_200_000) == 203_584
    assert best(3_030_056_960) == best(3_030_384_639) == 203_584
    assert best(3_030_056_960 - 1) < 203_584 < best(3_030_384_639 + 1)


def test_smaller_batched_tokens_shrink_the_sliding_layers() -> None:
    needed = vllm_kv_needed(GEMMA4_26B, 262144, max_num_batched_tokens=2048, **FP8)
    assert f"{needed / GiB:.2f}" == "2.79"


@pytest.mark.parametrize("length", [1, 15, 16, 17, 1000, 9215, 9216, 9231, 65536, 131072, 203584, 262144])
@pytest.mark.parametrize("mnbt", [2048, 8192])
def test_needed_matches_the_closed_form_on_both_sides_of_the_window(length: int, mnbt: int) -> None:
    assert vllm_kv_needed(GEMMA4_26B, length, max_num_batched_tokens=mnbt, **FP8) == gemma4_closed_form(length, mnbt)


def test_hybrid_layout_unifies_pages_and_groups_by_fives() -> None:
    layout = vllm_kv_layout(GEMMA4_26B, **FP8)
    assert layout.mode == "hybrid"
    assert layout.page_bytes == 65_536 and layout.group_size == 5
    assert {(s.kind, s.block_size, s.page_bytes) for s in layout.specs} == {
        ("full", 32, 65_536),
        ("sliding", 16, 65_536),
    }
    assert sorted(g.kind for g in layout.groups) == ["full"] + ["sliding"] * 5
    # bf16 doubles every page, so the grouping is unchanged and the need doubles
    assert vllm_kv_needed(GEMMA4_26B, 4096, kv_dtype_bytes=2) == 2 * vllm_kv_needed(GEMMA4_26B, 4096, **FP8)


def test_concurrency_and_cache_tokens_follow_vllms_log_lines() -> None:
    layout = vllm_kv_layout(GEMMA4_26B, **FP8)
    available = 3_000_000_000
    blocks = available // 65_536 // 5
    assert layout.num_blocks(available) == blocks
    assert layout.cache_tokens(available) == blocks // 6 * 16
    per_request = gemma4_closed_form(131072, 8192) // 327_680
    assert layout.concurrency(131072, 8192, available) == pytest.approx(blocks / per_request)
    assert layout.num_blocks(-5) == 0


def test_identical_layers_form_one_uniform_group() -> None:
    layers = [KvLayer("full", 8, 128)] * 4
    layout = vllm_kv_layout(layers)
    page = 2 * 16 * 8 * 128 * 2
    assert layout.mode == "uniform" and layout.group_size == 4 and layout.page_bytes == page
    assert layout.needed(1000, 2048) == 4 * cdiv(1000, 16) * page
    assert layout.concurrency(1000, 2048, 10 * page * 4 * 63) == pytest.approx(10 * 63 / cdiv(1000, 16))


def test_one_attention_type_with_several_shapes_sums_per_layer() -> None:
    layers = [KvLayer("full", 8, 128), KvLayer("full", 2, 512), KvLayer("full", 4, 64)]
    layout = vllm_kv_layout(layers)
    assert layout.mode == "uniform_type" and len(layout.groups) == 1
    pages = [2 * 16 * 8 * 128 * 2, 2 * 16 * 2 * 512 * 2, 2 * 16 * 4 * 64 * 2]
    assert layout.page_bytes == sum(pages)
    assert layout.needed(100, 2048) == sum(cdiv(100, 16) * p for p in pages)
    assert layout.num_blocks(sum(pages) * 7 + 1) == 7
    assert layout.cache_tokens(sum(pages) * 7) == 7 * 16
    assert layout.concurrency(100, 2048, sum(pages) * 14) == pytest.approx(14 / cdiv(100, 16))


def test_sliding_layers_of_one_window_but_two_shapes_are_one_type() -> None:
    layout = vllm_kv_layout([KvLayer("sliding", 8, 128, 64), KvLayer("sliding", 4, 128, 64)])
    assert layout.mode == "uniform_type"
    pages = [2 * 16 * 8 * 128 * 2, 2 * 16 * 4 * 128 * 2]
    assert layout.needed(10_000, 512) == sum((cdiv(64 - 1 + 512, 16) + 1) * p for p in pages)
    assert vllm_kv_layout([KvLayer("sliding", 8, 128, 64), KvLayer("sliding", 8, 128, 32)]).mode == "hybrid"


def test_nearly_equal_counts_pad_instead_of_splitting() -> None:
    # gpt-oss + EAGLE in vLLM's comment: 12 sliding + 13 full -> groups of 13, one padding layer
    layers = [KvLayer("sliding", 8, 64, 128)] * 12 + [KvLayer("full", 8, 64)] * 13
    layout = vllm_kv_layout(layers)
    assert layout.group_size == 13 and len(layout.groups) == 2
    page = 2 * 16 * 8 * 64 * 2
    expected = 13 * page * (cdiv((cdiv(min(127 + 2048, 8192), 16) + 1) * page, page) + cdiv(8192, 16))
    assert layout.needed(8192, 2048) == expected


def test_the_padding_rule_stops_at_one_and_a_half() -> None:
    sliding, full = KvLayer("sliding", 8, 64, 128), KvLayer("full", 8, 64)
    assert vllm_kv_layout([sliding] * 10 + [full] * 14).group_size == 14  # 14 < 15: pad the sliding type
    assert vllm_kv_layout([sliding] * 10 + [full] * 15).group_size == 10  # 15 = 1.5 x 10: split instead


def test_the_window_keeps_window_minus_one_tokens_plus_a_batch() -> None:
    layer = KvLayer("sliding", 1, 64, 17)
    page = 2 * 16 * 64 * 2
    # 17 - 1 + 16 = 32 tokens: two whole blocks, plus one for a window that starts mid-block
    assert vllm_kv_needed([layer], 1000, max_num_batched_tokens=16) == 3 * page
    assert vllm_kv_needed([layer], 20, max_num_batched_tokens=16) == (cdiv(20, 16) + 1) * page


def test_uneven_counts_split_the_larger_type_into_padded_groups() -> None:
    layers = [KvLayer("full", 8, 64)] * 20 + [KvLayer("sliding", 8, 64, 128)] * 30
    layout = vllm_kv_layout(layers)
    assert layout.group_size == 20
    assert sorted(g.kind for g in layout.groups) == ["full", "sliding", "sliding"]


def test_pages_that_do_not_divide_cannot_be_unified() -> None:
    with pytest.raises(ModelDataError, match="cannot unify"):
        vllm_kv_layout([KvLayer("full", 1, 96), KvLayer("sliding", 1, 128, 64)])


def test_binary_search_edges() -> None:
    assert largest_fitting(0, lambda n: True) == 0
    assert largest_fitting(10, lambda n: False) == 0
    assert largest_fitting(10, lambda n: True) == 10
    assert largest_fitting(1000, lambda n: n <= 377) == 377
    assert vllm_max_model_len(GEMMA4_26B, 10, max_model_len=1000, **FP8) == 0


def test_max_model_len_search_defaults_to_the_model_limit() -> None:
    gemma = ModelArch(layers=GEMMA4_26B, num_hidden_layers=30, max_position_embeddings=65536)
    assert vllm_max_model_len(gemma, 10 * GiB, **FP8) == 65536
    with pytest.raises(ValueError, match="max_model_len"):
        vllm_max_model_len(GEMMA4_26B, 10 * GiB)
    with pytest.raises(ValueError, match="without KV layers"):
        vllm_kv_needed([], 100)


def test_kv_dtype_follows_the_model_dtype_on_auto() -> None:
    gemma = models()["cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"].arch
    assert gemma is not None
    assert vllm_kv.vllm_kv_dtype_bytes("fp8_e5m2", "auto", gemma) == 1
    assert vllm_kv.vllm_kv_dtype_bytes("auto", "auto", gemma) == gemma.dtype_bytes == 2
    assert vllm_kv.vllm_kv_dtype_bytes("auto", "float32", gemma) == 4


def test_activation_estimate_takes_the_widest_block() -> None:
    dense = ModelArch(layers=(FULL,), num_hidden_layers=1, hidden_size=100, intermediate_size=1000)
    assert vllm_kv.vllm_activation_bytes_per_token(dense) == 2 * (400 + 2000)
    moe = ModelArch(
        layers=(FULL,),
        num_hidden_layers=1,
        hidden_size=100,
        intermediate_size=10,
        moe_intermediate_size=50,
        experts_per_token=4,
    )
    assert vllm_kv.vllm_activation_bytes_per_token(moe) == 2 * (400 + 4 * (150 + 100))
    attention = ModelArch(
        layers=(FULL,), num_hidden_layers=1, hidden_size=100, intermediate_size=10, num_attention_heads=16
    )
    assert vllm_kv.vllm_activation_bytes_per_token(attention) == 2 * (400 + 16 * 512 + 2 * 2 * 512)
    assert vllm_kv.vllm_overhead_estimate(dense, 1000) == vllm_kv.VLLM_RUNTIME_BYTES + 1000 * 2 * (400 + 2000)


# --------------------------------------------------------------------------- vLLM: reports for the apps


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: p.stem)
def test_seed_apps_fit_at_their_contexts(path: Path) -> None:
    report = fit_report(load_spec(path))
    assert report.fits
    assert report.max_model_len_fit == report.max_model_len
    assert report.headroom_bytes == report.kv_cache_available_bytes - report.kv_cache_needed_bytes > 0
    assert report.max_model_len_limit >= report.max_model_len
    assert report.concurrency >= 1
    assert report.utilization_needed is not None


def test_vision_report_budget_adds_up(tmp_path: Path) -> None:
    data = app_data()
    data["resources"]["gpu_memory"] = {"request": "24400Mi", "limit": "24400Mi"}  # the seed author's booking
    report = fit_report(load_spec(write_spec(tmp_path, data)))
    total = 24400 * MiB
    assert report.total_bytes == total and report.budget_bytes == math.ceil(total * 0.94)
    non_kv = report.weights_bytes + report.drafter_weights_bytes + report.overhead_bytes
    assert report.kv_cache_available_bytes == report.budget_bytes - non_kv
    assert report.kv_cache_needed_bytes == gemma4_closed_form(131072, 8192)
    assert report.drafter_kv_bytes == 0  # the MTP assistant reads the target's cache
    assert report.overhead_source == "estimate" and not report.weights_exact
    assert report.settings["max_num_batched_tokens"] == 8192 and report.settings["kv_dtype_bytes"] == 1
    # the estimate lands near the seed's boot: about 19.6 GiB of non-KV memory, 2.82 GiB for KV
    assert 19.3 < non_kv / GiB < 19.9
    assert abs(report.kv_cache_available_bytes / GiB - 2.82) < 0.1


def test_calibration_reproduces_the_refusal(tmp_path: Path) -> None:
    data = app_data()
    data["resources"]["gpu_memory"] = {"request": "24400Mi", "limit": "24400Mi"}  # the seed author's booking
    spec = load_spec(write_spec(tmp_path, data))
    report = fit_report(
        spec,
        max_model_len=262144,
        calibrated_kv_available_bytes=3_030_200_000,
        calibrated_at_utilization=0.94,
        calibrated_total_bytes=24400 * MiB,
    )
    assert report.kv_cache_available_bytes == 3_030_200_000
    assert report.kv_cache_needed_bytes == 3_629_711_360
    assert not report.fits and report.max_model_len_fit == 203_584
    assert report.overhead_source == "calibrated"
    non_kv = math.ceil(24400 * MiB * 0.94) - 3_030_200_000
    assert report.weights_bytes + report.drafter_weights_bytes + report.overhead_bytes == non_kv
    lower = fit_report(
        spec,
        gpu_memory_utilization=0.92,
        calibrated_kv_available_bytes=3_030_200_000,
        calibrated_at_utilization=0.94,
        calibrated_total_bytes=24400 * MiB,
    )
    assert lower.kv_cache_available_bytes == math.ceil(24400 * MiB * 0.92) - non_kv
    # the measured non-KV memory carries over to another booking (the profile's 24000 MiB)
    booked = fit_report(
        load_app("gemma4-vision"),
        calibrated_kv_available_bytes=3_030_200_000,
        calibrated_at_utilization=0.94,
        calibrated_total_bytes=24400 * MiB,
    )
    assert booked.total_bytes == 24000 * MiB
    assert booked.kv_cache_available_bytes == math.ceil(24000 * MiB * 0.94) - non_kv


def test_given_available_replaces_the_estimate() -> None:
    report = fit_report(load_app("gemma4-vision"), max_model_len=262144, kv_available_bytes=3_030_200_000)
    assert report.overhead_source == "given" and report.max_model_len_fit == 203_584
    assert report.max_model_len_limit == 203_584  # Gemma 4's own limit is 262144: the search stops at the fit
    assert report.concurrency == pytest.approx(
        (3_030_200_000 // 65_536 // 5) / (gemma4_closed_form(203_584, 8192) // 327_680)
    )


def test_utilization_needed_is_the_first_that_fits() -> None:
    spec = load_app("gemma4-vision")
    report = fit_report(spec, max_model_len=196608)
    needed = report.utilization_needed
    assert needed is not None
    assert fit_report(spec, max_model_len=196608, gpu_memory_utilization=needed).fits
    assert not fit_report(spec, max_model_len=196608, gpu_memory_utilization=round(needed - 0.01, 2)).fits


def test_dflash_drafter_adds_its_own_layers() -> None:
    report = fit_report(load_app("gemma4-dflash"))
    # 5 full-attention layers, 8 KV heads x 128 at fp8: pages of 32 KiB grown to 64 KiB, blocks of 32
    assert report.drafter_kv_bytes == 5 * 65_536 * cdiv(16384, 32)
    assert report.kv_cache_needed_bytes == gemma4_closed_form(16384, 8192) + report.drafter_kv_bytes
    assert report.settings["kv_groups"] == 7
    assert report.gpu_memory_utilization == 0.92 and report.fits


def test_app_gpu_memory_limit_wins_over_the_profile(tmp_path: Path) -> None:
    data = app_data("gemma4-vision")
    data["resources"]["gpu_memory"] = {"request": "16Gi", "limit": "16Gi"}
    report = fit_report(load_spec(write_spec(tmp_path, data)))
    assert report.total_bytes == 16 * GiB
    assert not report.fits and report.kv_cache_available_bytes < 0
    assert report.max_model_len_fit == report.max_model_len_limit == 0
    assert report.concurrency == 0.0 and report.utilization_needed is None
    assert report.settings["kv_cache_tokens"] == 0
    assert load_app("gemma4-dflash").gpu_memory() == profiles()["rtx5090-laptop"].booking_mib * MiB


def test_default_batched_tokens(tmp_path: Path) -> None:
    chunked = fit_report(changed_app(tmp_path, "gemma4-vision", max_num_batched_tokens=None))
    assert chunked.settings["max_num_batched_tokens"] == vllm_kv.VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
    assert any("max_num_batched_tokens" in note for note in chunked.notes)
    whole = fit_report(
        changed_app(tmp_path, "gemma4-vision", max_num_batched_tokens=None, enable_chunked_prefill=False)
    )
    assert whole.settings["max_num_batched_tokens"] == 131072


def test_a_shared_kv_model_cannot_be_the_target(tmp_path: Path) -> None:
    spec = changed_app(tmp_path, "gemma4-vision", model="google/gemma-4-26B-A4B-it-assistant")
    with pytest.raises(ModelDataError, match="cannot be a vLLM target"):
        fit_report(spec)


def test_unknown_models_are_named() -> None:
    with pytest.raises(ModelDataError, match="cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"):
        fit_report(load_app("gemma4-vision"), registry={})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_model_len": 0}, "max_model_len"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"calibrated_at_utilization": 0.0, "calibrated_kv_available_bytes": 1}, "calibrated_at_utilization"),
        ({"calibrated_kv_available_bytes": 1}, "both"),
        ({"kv_available_bytes": 1, "calibrated_kv_available_bytes": 1, "calibrated_at_utilization": 0.9}, "not both"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        fit_report(load_app("gemma4-vision"), **kwargs)


def test_report_is_json_ready_and_readable() -> None:
    report = fit_report(load_app("gemma4-vision"))
    data = json.loads(json.dumps(report.as_dict()))
    for key in ("kv_cache_needed_bytes", "kv_cache_available_bytes", "max_model_len_fit", "fits"):
        assert data[key] == getattr(report, key)
    assert data["total_needed_bytes"] == report.total_needed_bytes
    lines = report.table()
    assert lines[0].startswith("vllmgemma426ba4bvisionone: vLLM, cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit")
    assert any(
        "KV cache needed at 131072 tokens" in line and f"{report.kv_cache_needed_bytes / GiB:.2f} GiB" in line
        for line in lines
    )
    assert any(line.strip().startswith("fits:") for line in lines)
    assert any("gpu_memory_utilization >=" in line for line in lines)
    refused = fit_report(load_app("gemma4-vision"), max_model_len=262144, kv_available_bytes=3_030_200_000)
    assert any("DOES NOT FIT" in line for line in refused.table())
    assert any("drafter" in line and "GiB" in line for line in fit_report(load_app("gemma4-dflash")).table())


# --------------------------------------------------------------------------- llama.cpp


def e4b() -> ModelArch:
    found = models()[E4B_REPO].arch
    assert found is not None
    return found


def test_e4b_kv_f16() -> None:
    kv = llamacpp_kv_bytes(e4b(), 32768)
    full = 4 * 2 * (2 * 512 * 2) * 32768  # 16 KiB a token over the 4 full layers
    swa_cells = 1024  # min(32768, window 512 + ubatch 512), padded to 256
    sliding = 20 * 2 * (2 * 256 * 2) * swa_cells
    assert full == 16 * 1024 * 32768
    assert kv == full + sliding


def test_e4b_kv_q8_0_and_mixed_types() -> None:
    q8 = llamacpp_kv_bytes(e4b(), 32768, type_k="q8_0", type_v="q8_0")
    assert q8 == 4 * 2 * (1024 // 32 * 34) * 32768 + 20 * 2 * (512 // 32 * 34) * 1024
    mixed = llamacpp_kv_bytes(e4b(), 32768, type_k="q8_0", type_v="q4_0")
    assert mixed == 4 * (1088 + 576) * 32768 + 20 * (544 + 288) * 1024
    assert q8 < llamacpp_kv_bytes(e4b(), 32768)


def test_context_is_padded_and_split_among_slots() -> None:
    assert llamacpp_kv_bytes(e4b(), 1000) == llamacpp_kv_bytes(e4b(), 1024)
    split = llamacpp_context(32768, parallel=3)
    assert (split.n_ctx_seq, split.n_ctx, split.n_stream) == (11008, 33024, 3)
    # each stream keeps its own window of cells in the sliding layers
    assert llamacpp_kv_bytes(e4b(), 32768, parallel=3) == 4 * 4096 * 33024 + 20 * 2048 * 1024 * 3
    unified = llamacpp_context(32768, parallel=4, kv_unified=True)
    assert (unified.n_ctx_seq, unified.n_stream) == (32768, 1)
    assert llamacpp_kv_bytes(e4b(), 32768, parallel=4, kv_unified=True) == (
        4 * 4096 * 32768 + 20 * 2048 * (512 * 4 + 512)
    )
    assert llamacpp_kv_bytes(e4b(), 32768, swa_full=True) == 4 * 4096 * 32768 + 20 * 2048 * 32768


def test_batches_are_capped_by_the_context() -> None:
    assert llamacpp_context(300, batch_size=2048, ubatch_size=512).n_ubatch == 300
    assert llamacpp_context(32768, batch_size=256, ubatch_size=512).n_ubatch == 256


def test_rows_must_fill_whole_blocks() -> None:
    assert llamacpp_kv.ggml_row_bytes("f32", 10) == 40
    with pytest.raises(ModelDataError, match="blocks of 32"):
        llamacpp_kv.ggml_row_bytes("q8_0", 48)


def test_compute_buffer_grows_without_flash_attention() -> None:
    gemma = e4b()
    margin = llamacpp_kv.LLAMACPP_COMPUTE_MARGIN
    with_fa = llamacpp_kv.llamacpp_compute_bytes(gemma, 512, 32768, flash_attn=True)
    # activations (FFN, residual, the 42 x 256 per-layer inputs) in f32, and the f16 mask over the context
    assert with_fa == math.ceil((512 * 4 * (4 * 2560 + 3 * 10240 + 42 * 256) + 512 * 32768 * 2) * margin)
    without = llamacpp_kv.llamacpp_compute_bytes(gemma, 512, 32768, flash_attn=False)
    # without it the mask is f32 and every head's f32 scores are kept: 36 bytes per ubatch and context token
    assert without == math.ceil((512 * 4 * (4 * 2560 + 3 * 10240 + 42 * 256) + 512 * 32768 * 36) * margin)


def test_audio_app_needs_about_6_5_gb() -> None:
    report = fit_report(load_app("gemma4-audio"))
    files = models()[E4B_REPO].files
    gguf, mmproj = files["gemma-4-E4B-it-Q4_K_M.gguf"], files["mmproj-BF16.gguf"]
    # host: token_embd (Q6_K) + the per-layer table (Q4_K), the 2037 MiB an H200 boot maps; GPU: token_embd again
    assert (gguf.host_bytes, gguf.gpu_copy_bytes) == (2037 << 20, 262144 * 2560 // 256 * 210)
    assert report.weights_bytes == gguf.bytes - gguf.host_bytes + gguf.gpu_copy_bytes + mmproj.bytes
    assert "1.99 GiB of input embeddings (token_embd and any per-layer table) stay in host" in report.notes[0]
    assert report.kv_cache_needed_bytes == llamacpp_kv_bytes(e4b(), 32768, ubatch_size=512)
    # the projector's encoders with a largest image and 30 s of audio take 810 MiB beyond its file (measured.md)
    assert 6.5e9 < report.total_needed_bytes < 7.0e9
    # the booking `olarespack plan` wrote: the smallest whole MiB that holds it
    assert report.total_bytes == 6507 * 2**20 and report.fits
    assert 0 <= report.headroom_bytes < 2**20
    assert report.concurrency == 1.0 and report.settings["n_ctx_per_slot"] == 32768
    assert report.max_model_len_limit == 32768  # nothing more fits in its share
    assert report.utilization_needed == 1.0
    assert report.table()[0].startswith("llamacppgemma4audione: llama.cpp, unsloth/gemma-4-E4B-it-GGUF")


def test_llamacpp_settings_reach_the_arithmetic(tmp_path: Path) -> None:
    spec = changed_app(
        tmp_path,
        "gemma4-audio",
        parallel=None,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        flash_attn="off",
        n_gpu_layers=10,
        extra_args=["--swa-full"],
    )
    report = fit_report(spec)
    assert report.settings["parallel"] == llamacpp_kv.LLAMACPP_AUTO_PARALLEL and report.settings["kv_unified"] is True
    assert report.settings["swa_full"] is True and report.settings["flash_attn"] is False
    assert report.kv_cache_needed_bytes == llamacpp_kv_bytes(
        e4b(), 32768, parallel=4, kv_unified=True, type_k="q8_0", type_v="q8_0", swa_full=True, flash_attn=False
    )
    notes = " ".join(report.notes)
    assert "--parallel not set" in notes and "flash attention" in notes and "n_gpu_layers 10" in notes
    split = fit_report(changed_app(tmp_path, "gemma4-audio", parallel=2, extra_args=["-kvu"]))
    assert split.settings["kv_unified"] is True and split.concurrency == 1.0
    slots = fit_report(changed_app(tmp_path, "gemma4-audio", parallel=2))
    assert slots.concurrency == 2.0 and slots.settings["n_ctx_per_slot"] == 16384


def test_llamacpp_search_when_the_context_does_not_fit() -> None:
    spec = load_app("gemma4-audio")
    base = fit_report(spec)
    report = fit_report(spec, max_model_len=131072, kv_available_bytes=base.kv_cache_needed_bytes)
    assert report.overhead_source == "given" and not report.fits
    assert report.max_model_len_fit == 32768
    assert report.weights_bytes + report.overhead_bytes + report.kv_cache_available_bytes == report.total_bytes
    assert fit_report(spec, kv_available_bytes=0).max_model_len_fit == 0


def test_llamacpp_refuses_calibration_and_unknown_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="vLLM apps only"):
        fit_report(load_app("gemma4-audio"), calibrated_kv_available_bytes=1, calibrated_at_utilization=0.9)
    data = app_data("gemma4-audio")
    data["engine"]["model"]["file"] = "gemma-4-E4B-it-Q8_0.gguf"
    with pytest.raises(ModelDataError, match=r"no size for gemma-4-E4B-it-Q8_0\.gguf"):
        fit_report(load_spec(write_spec(tmp_path, data)))
    shared = ModelInfo(repo=E4B_REPO, title="t", arch=None, kv="shared")
    with pytest.raises(ModelDataError, match="no KV layers"):
        fit_report(load_app("gemma4-audio"), registry={E4B_REPO: shared})


def test_the_container_memory_must_hold_what_llama_cpp_keeps_on_the_host(tmp_path: Path) -> None:
    data = app_data("gemma4-audio")
    report = fit_report(load_spec(write_spec(tmp_path, data)))
    # E4B's input embeddings (token_embd and the per-layer table) and the pinned compute buffer
    files = models()[E4B_REPO].files["gemma-4-E4B-it-Q4_K_M.gguf"]
    assert report.host_memory_bytes is not None and report.host_memory_bytes > files.host_bytes
    assert report.host_memory_bytes - files.host_bytes == llamacpp_kv.llamacpp_host_compute_bytes(e4b(), 512, 32768)
    _, problems = resolve_context("app.yaml", load_spec(write_spec(tmp_path, data)))
    assert not [p for p in problems if p.rule == "host-memory"]
    data["resources"]["memory"] = {"request": "1Gi", "limit": "2Gi"}
    _, problems = resolve_context("app.yaml", load_spec(write_spec(tmp_path, data)))
    found = {(p.path, p.severity): p for p in problems if p.rule == "host-memory"}
    assert set(found) == {("resources.memory.limit", "error"), ("resources.memory.request", "warning")}
    assert "set resources.memory.limit to at least 3Gi" in found[("resources.memory.limit", "error")].fix
    assert fit_report(load_app("gemma4-vision")).host_memory_bytes is None  # vLLM: not modelled


@pytest.mark.parametrize(("flash", "share"), [("on", "6640Mi"), ("off", "7640Mi")])  # 6000, 7000 + the projector's 640
def test_the_largest_llama_cpp_context_counts_its_own_compute_buffer(tmp_path: Path, flash: str, share: str) -> None:
    data = app_data("gemma4-audio")
    data["engine"]["ctx_size"] = 131072
    data["engine"]["flash_attn"] = flash
    data["resources"]["gpu_memory"] = {"request": share, "limit": share}
    report = fit_report(load_spec(write_spec(tmp_path, data)))
    # without flash attention the asked context's compute buffer alone passes the budget: still searched
    assert not report.fits and 16384 < report.max_model_len_fit < 131072
    assert report.max_model_len_limit == report.max_model_len_fit
    fixed = (
        report.total_bytes
        - report.weights_bytes
        - llamacpp_kv.LLAMACPP_RUNTIME_BYTES
        - llamacpp_kv.MMPROJ_COMPUTE_BYTES
    )

    def needs(n: int) -> int:  # KV and the compute buffer at n tokens (-ub 512)
        ctx = llamacpp_context(n, ubatch_size=512, batch_size=512)
        return llamacpp_kv_bytes(
            e4b(), n, ubatch_size=512, batch_size=512, flash_attn=flash == "on"
        ) + llamacpp_kv.llamacpp_compute_bytes(e4b(), 512, ctx.n_ctx, flash_attn=flash == "on")

    assert needs(report.max_model_len_fit) <= fixed < needs(report.max_model_len_fit + 256)


def test_a_llama_cpp_calibration_at_a_smaller_context_grows_its_compute_buffer(tmp_path: Path) -> None:
    """A boot measured at 32K gives that context's compute buffer; at 128K the mask grows, which the estimate
    adds (a calibration never shrinks what a larger context needs)."""
    data = app_data("gemma4-audio")
    engine = data["engine"]
    engine["calibration"] = {
        "model": engine["model"]["repo"],
        "image": engine["image"],
        "hardware": data["hardware"],
        "n_ctx": 32768,
        "model_buffer_mib": {"CUDA0": 2975.79, "CPU_Mapped": 2037.0},
        "kv_buffer_mib": {"CUDA0": 552.0},
        "compute_buffer_mib": {"CUDA0": 134.02, "CUDA_Host": 79.03},
    }  # the H200 boot of measured.md
    at_32k = fit_report(load_spec(write_spec(tmp_path, data)))
    engine["ctx_size"] = 131072
    at_128k = fit_report(load_spec(write_spec(tmp_path, data)))
    assert at_32k.overhead_source == at_128k.overhead_source == "calibrated"
    assert at_32k.overhead_bytes == llamacpp_kv.LLAMACPP_RUNTIME_BYTES + round(134.02 * 2**20)
    growth = llamacpp_kv.llamacpp_compute_bytes(
        e4b(), 512, 131072, flash_attn=True
    ) - llamacpp_kv.llamacpp_compute_bytes(e4b(), 512, 32768, flash_attn=True)
    assert at_128k.overhead_bytes == at_32k.overhead_bytes + growth
    # the real 128K boot's buffer (230.02 MiB) is covered
    assert at_128k.overhead_bytes >= llamacpp_kv.LLAMACPP_RUNTIME_BYTES + 230.02 * 2**20


def test_vllm_drafting_with_the_models_own_mtp_layers_counts_their_kv() -> None:
    """Method mtp with no draft model: vLLM drafts with the target's num_nextn_predict_layers decoder layers past
    its trunk (glm4_moe_mtp.py), each a KV cache of the target's full-attention shape in the same pool."""
    from olarespack.engines.fit import FitRequest
    from olarespack.engines.vllm.fit import fit as vllm_fit
    from olarespack.engines.vllm.spec import VllmEngine
    from olarespack.models.registry import model_from_data

    config = {
        "model_type": "glm4_moe", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 64, "max_position_embeddings": 32768, "num_nextn_predict_layers": 1,
    }  # fmt: skip
    info = model_from_data(
        "glm", {"repo": "t/glm", "title": "tiny GLM", "weights": {"bytes": 10**9, "exact": True}, "config": config,
                "sources": ["a test"]},
    )  # fmt: skip
    assert info.arch is not None and (len(info.arch.layers), info.arch.nextn_layers) == (4, 1)

    def report(speculative: dict[str, object] | None) -> Any:
        engine = VllmEngine.model_validate({
            "kind": "vllm", "image": "vllm/vllm-openai:v0.21.0-cu129", "model": "t/glm", "served_model_name": "glm",
            "max_model_len": 16384,
            "gpu_memory_utilization": 0.9, "max_num_batched_tokens": 4096, "speculative": speculative,
        })  # fmt: skip
        return vllm_fit(engine, FitRequest(total=24 << 30, registry={"t/glm": info}))

    alone, drafting = report(None), report({"method": "mtp", "num_speculative_tokens": 1})
    per_layer = alone.kv_cache_needed_bytes / 4  # four identical full-attention layers
    assert alone.drafter_kv_bytes == 0
    assert drafting.drafter_kv_bytes == per_layer and drafting.kv_cache_needed_bytes == 5 * per_layer
