"""vLLM 0.34 on Olares: its release table (read from its wheel), its extensible KV cache (CUDA virtual memory,
which HAMi-core crashes on: Project-HAMi/HAMi-core #187) refused unless the chart fixes the cache's size, and fit's
arithmetic for a fixed size (the rest of vLLM's memory on top of it, within the booking)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from olarespack.core import quantity
from olarespack.engines import engine_problems
from olarespack.engines.llamacpp.tables import surface as llamacpp_surface
from olarespack.engines.releases import tables
from olarespack.engines.vllm.tables import surface as vllm_surface
from olarespack.fit.budget import fit_report, resolve_context
from olarespack.render.plan import plan_chart
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

IMAGE_034 = "vllm/vllm-openai:v0.34.0"


def vision_on(tmp_path: Path, **engine: Any) -> Path:
    data = app_data("gemma4-vision")
    data["engine"].update(image=IMAGE_034, **engine)
    data["engine"].pop("calibration", None)  # measured on 0.21: another release's memory
    return write_spec(tmp_path, data)


def test_the_034_table_is_read_from_its_wheel() -> None:
    [table] = [t for t in tables("vllm") if t.release == "0.34"]
    assert "vllm-0.34.0" in table.source
    assert table.option("--enable-extensible-kv-cache") is not None
    assert table.option("--kv-cache-memory-bytes") is not None
    keys = table.sets["speculative_keys"]
    assert "disable_padded_drafter_batch" not in keys and "num_speculative_tokens" in keys  # removed in 0.34


def test_the_table_writers_write_where_lint_reads() -> None:
    for kind, module in (("vllm", vllm_surface), ("llamacpp", llamacpp_surface)):
        read = Path(str(resources.files("olarespack").joinpath(f"engines/{kind}/releases")))
        assert read.resolve() == module.DEFAULT_OUT


def test_an_extensible_cache_on_olares_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = vision_on(tmp_path)
    found = [p for p in engine_problems(str(path), load_spec(path)) if p.rule == "vllm-extensible-kv-cache"]
    assert [p.path for p in found] == ["engine.kv_cache_memory_bytes"]
    assert found[0].severity == "error" and "HAMi-core #187" in found[0].message and "olarespack fit" in found[0].fix
    asked = vision_on(tmp_path, kv_cache_memory_bytes="2Gi", extra_args=["--enable-extensible-kv-cache"])
    found = [p for p in engine_problems(str(asked), load_spec(asked)) if p.rule == "vllm-extensible-kv-cache"]
    assert [p.path for p in found] == ["engine.extra_args[0]"]


def test_a_fixed_cache_is_written_and_checked_within_the_booking(tmp_path: Path) -> None:
    path = vision_on(tmp_path, kv_cache_memory_bytes="2Gi")
    spec = load_spec(path)
    assert not [p for p in engine_problems(str(path), spec) if p.rule == "vllm-extensible-kv-cache"]
    plan = plan_chart(spec, str(path))
    at = plan.effective_args.index("--kv-cache-memory-bytes")
    assert plan.effective_args[at + 1] == str(2 * 2**30)
    report = fit_report(spec)
    assert report.kv_cache_available_bytes == 2 * 2**30 and report.over_total_bytes == 0
    assert report.fits == (report.kv_cache_needed_bytes <= report.kv_cache_available_bytes)
    too_big = vision_on(tmp_path, kv_cache_memory_bytes="20Gi")
    spec = load_spec(too_big)
    report = fit_report(spec)
    assert report.over_total_bytes > 0 and not report.fits
    _, problems = resolve_context(str(too_big), spec)
    [over] = [p for p in problems if p.rule == "kv-bytes-over-booking"]
    assert over.path == "engine.kv_cache_memory_bytes" and "runs out of memory at start-up" in over.message
    most = float(over.fix.split()[3])
    assert quantity.parse_bytes("20Gi") - report.over_total_bytes <= most * 2**30 + 2**23


def test_a_context_past_a_fixed_cache_names_the_size_that_keeps_it(tmp_path: Path) -> None:
    """With the cache's size fixed, gpu_memory_utilization sizes nothing: the fix is the size, checked to fit."""
    path = vision_on(tmp_path, kv_cache_memory_bytes="2300Mi", max_model_len=65536)
    _, problems = resolve_context(str(path), load_spec(path))
    [short] = [p for p in problems if p.rule == "context-fit"]
    assert "gpu_memory_utilization" not in short.fix and "fixes the KV cache at 2.25 GiB" in short.message
    size = short.fix.split("engine.kv_cache_memory_bytes: ", 1)[1].split()[0]
    kept = vision_on(tmp_path, kv_cache_memory_bytes=size, max_model_len=65536)
    report = fit_report(load_spec(kept))
    assert report.fits and report.over_total_bytes == 0
    smaller = vision_on(tmp_path, kv_cache_memory_bytes=f"{int(size[:-2]) - 8}Mi", max_model_len=65536)
    assert not fit_report(load_spec(smaller)).fits  # the size named is the smallest, to 8 MiB


def test_a_release_before_034_needs_no_fixed_size(tmp_path: Path) -> None:
    data = app_data("gemma4-vision")
    path = write_spec(tmp_path, data)
    assert not [p for p in engine_problems(str(path), load_spec(path)) if p.rule == "vllm-extensible-kv-cache"]
