"""`olarespack bench --record`: the measurement lands in the changelog entry of the spec's version (only those
lines change, comments kept, never half-written), descriptions cite it as [[ bench.* ]], and a setting that
changes speed marks the cited figures stale, by data: in the rendered text, the catalog, lint's warning and
bump's notes."""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, spec_version
from olarespack.engines import engine_for
from olarespack.fit.record import STALE_MARK, newest_record, settings_hash, stale_bench
from olarespack.market.catalog import MarketApp, detail_entry
from olarespack.release.diff import AppDiff, ResourceChange
from olarespack.release.notes import stale_figures
from olarespack.render import render_chart
from olarespack.spec.citations import cite
from olarespack.spec.load import load_spec
from test_bench_client import FakeServer, Handler, metrics, models, vllm_like

CITATION = (
    "Bench: [[ bench.tps_avg ]] t/s average, peak [[ bench.tps_peak ]], acceptance [[ bench.acceptance ]]% "
    "(measured on [[ bench.version ]], [[ bench.runs ]] runs)"
)
COMMENT = "# where the installed 1.0.4 chart keeps the weights (about 18 GB): an upgrade finds them there"
VERSION = spec_version("gemma4-dflash")  # the tests follow the committed app through its bumps


@pytest.fixture
def server() -> Iterator[FakeServer]:
    counts = {"drafted": 0, "accepted": 0}
    routes: dict[str, Handler] = {
        "GET /v1/models": models("gemma-4-26b-a4b-dflash"),
        "POST /v1/chat/completions": vllm_like(counts),
        "GET /metrics": metrics(counts),
    }
    fake = FakeServer(routes)
    yield fake
    fake.stop()


def _cite_bench(spec_file: Path) -> None:
    text = spec_file.read_text(encoding="utf-8")
    text = text.replace("    OpenAI-compatible API on port", f"    {CITATION}\n\n    OpenAI-compatible API on port", 1)
    spec_file.write_text(text, encoding="utf-8")


def _description(project: Path) -> str:
    manifest = yaml.safe_load((project / "charts/vllmgemma4dflashone/OlaresManifest.yaml").read_text("utf-8"))
    return str(manifest["spec"]["fullDescription"])


def _record(project: Path, server: FakeServer, *more: str) -> tuple[int, str]:
    return run_cli(
        project,
        "bench",
        "run",
        "vllmgemma4dflashone",
        "--url",
        server.url,
        "--runs",
        "3",
        "--warmups",
        "1",
        "--max-tokens",
        "30",
        "--record",
        "--hardware",
        "rtx5090-laptop",
        *more,
    )


def test_record_round_trip(project: Path, server: FakeServer) -> None:
    spec_file = project / "apps" / "gemma4-dflash.yaml"
    _cite_bench(spec_file)
    code, out = run_cli(project, "build")
    assert code == 1
    assert (
        "changelog: metadata.full_description cite [[ bench.* ]], but no changelog entry records a bench "
        "(fix: measure the app with `olarespack bench run SPEC --url URL --record`"
    ) in out

    before = spec_file.read_text(encoding="utf-8")
    code, out = _record(project, server)
    assert code == 0, out
    after = spec_file.read_text(encoding="utf-8")
    added = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:2] in ("+ ", "- ")]
    assert all(line.startswith("+ ") for line in added) and added[0] == "+     bench:"
    assert len(added) == 1 + len(yaml.safe_load(after)["changelog"][0]["bench"])  # nothing else moved
    assert COMMENT in after
    entry = yaml.safe_load(after)["changelog"][0]
    assert {**entry, "bench": None} == {**yaml.safe_load(before)["changelog"][0], "bench": None}
    assert entry["version"] == VERSION
    record = entry["bench"]
    spec = load_spec(spec_file)
    engine = engine_for(spec.engine)
    assert record["settings_hash"] == settings_hash(spec)
    assert (record["runs"], record["warmups"], record["tokens"], record["prompt"]) == (3, 1, 30, "space-invaders")
    assert (record["context"], record["hardware"], record["engine_release"]) == (
        engine.context_length(),
        spec.hardware,
        engine.version(),
    )
    assert (record["drafted"], record["accepted"], record["acceptance"]) == (90, 60, 66.7)
    assert record["tps_source"] == "stream" and len(record["series"]) == 3
    assert record["date"] == dt.date.today()

    code, out = run_cli(project, "build")
    assert code == 0, out
    text = _description(project)
    assert (
        f"Bench: {record['tps_avg']} t/s average, peak {record['tps_peak']}, acceptance 66.7% (measured on "
        f"{VERSION}, 3 runs)" in text
    )
    assert "settings changed since" not in text

    # a setting that changes speed: the figures are marked, the version and the run count are not
    spec_file.write_text(after.replace("max_num_seqs: 4", "max_num_seqs: 2"), encoding="utf-8")
    code, out = run_cli(project, "build")
    assert code == 0, out
    mark = STALE_MARK.format(version=VERSION)
    stale_text = _description(project)
    assert (
        f"Bench: {record['tps_avg']}{mark} t/s average, peak {record['tps_peak']}{mark}, acceptance 66.7{mark}% "
        f"(measured on {VERSION}, 3 runs)" in stale_text
    )
    found = stale_bench(load_spec(spec_file))
    assert found is not None and found.path == "changelog[0].bench"
    assert "were measured with other settings that change speed" in found.message
    assert "olarespack bench run SPEC --url URL --record" in found.fix

    # measured again: replaced in place, current again
    code, out = _record(project, server)
    assert code == 0 and f"changelog[0].bench replaced for {VERSION}" in out
    again = spec_file.read_text(encoding="utf-8")
    assert again.count("    bench:\n") == 1 and "max_num_seqs: 2" in again and COMMENT in again
    assert stale_bench(load_spec(spec_file)) is None


def test_what_does_not_change_speed_leaves_the_record_current(project: Path, server: FakeServer) -> None:
    spec_file = project / "apps" / "gemma4-dflash.yaml"
    assert _record(project, server)[0] == 0
    recorded = spec_file.read_text(encoding="utf-8")
    for harmless in (
        ("title: Gemma 4 26B DFlash One", "title: Gemma 4 26B DFlash"),
        ("gpu_memory_utilization: 0.92", "gpu_memory_utilization: 0.9"),
        ("memory: {request: 24Gi, limit: 40Gi}", "memory: {request: 20Gi, limit: 40Gi}"),
    ):
        spec_file.write_text(recorded.replace(*harmless, 1), encoding="utf-8")
        assert stale_bench(load_spec(spec_file)) is None, harmless
    for speed in (
        ("num_speculative_tokens: 8", "num_speculative_tokens: 6"),
        ("max_model_len: 16384", "max_model_len: 32768"),
        ("kv_cache_dtype: fp8", "kv_cache_dtype: auto"),
        ("\nhardware: rtx5090-laptop", "\nhardware: rtx5090"),
        (
            "image: vllm/vllm-openai:tokenspeed-preview-x86_64-ubuntu2404",
            "image: vllm/vllm-openai:tokenspeed-preview2-x86_64-ubuntu2404",
        ),
    ):
        assert speed[0] in recorded, speed
        spec_file.write_text(recorded.replace(*speed, 1), encoding="utf-8")
        assert stale_bench(load_spec(spec_file)) is not None, speed


def test_a_citation_renders_the_newest_record(project: Path, server: FakeServer) -> None:
    spec_file = project / "apps" / "gemma4-dflash.yaml"
    assert _record(project, server)[0] == 0
    text = spec_file.read_text(encoding="utf-8")
    # a newer version without a record: descriptions still cite the older version's measurement, and say so
    text = text.replace(f"version: {VERSION}\nhardware", "version: 99.0.0\nhardware").replace(
        "changelog:\n", "changelog:\n  - version: 99.0.0\n    date: 2026-12-01\n    note: Texts only.\n", 1
    )
    spec_file.write_text(text, encoding="utf-8")
    spec = load_spec(spec_file)
    found = newest_record(spec)
    assert found is not None and (found.index, found.version, found.stale) == (1, VERSION, False)
    rendered, errors = cite("[[ bench.tps_avg ]] t/s on [[ bench.version ]]", {"bench": found.cited()}, found.marks())
    assert errors == [] and rendered == f"{found.record.tps_avg} t/s on {VERSION}"


def test_a_mark_follows_the_figures_it_is_given_for() -> None:
    context = {"bench": {"tps_avg": 223.9, "tps_peak": 235.22, "version": "1.0.4"}, "engine": {"max_model_len": 16384}}
    marks = {"bench.tps_avg": " (stale)", "bench.tps_peak": " (stale)"}
    text, errors = cite(
        "[[ bench.tps_avg ]] avg, range [[ bench.tps_peak - bench.tps_avg ]], [[ bench.version ]], "
        "[[ engine.max_model_len // 1024 ]]K",
        context,
        marks,
    )
    assert errors == []
    assert text == "223.9 (stale) avg, range 11.319999999999993 (stale), 1.0.4, 16K"  # one mark per citation
    assert cite("[[ bench.tps_avg ]]", context)[0] == "223.9"  # no marks: as before


def test_the_catalog_shows_a_stale_figure(project: Path, server: FakeServer) -> None:
    spec_file = project / "apps" / "gemma4-dflash.yaml"
    _cite_bench(spec_file)
    assert _record(project, server)[0] == 0
    spec_file.write_text(
        spec_file.read_text(encoding="utf-8").replace("max_num_batched_tokens: 8192", "max_num_batched_tokens: 4096"),
        "utf-8",
    )
    spec = load_spec(spec_file)
    chart = render_chart(spec, str(spec_file))
    entry = detail_entry(MarketApp(str(spec_file), spec, chart, "0" * 64, "https://example.invalid/icon.png"))
    assert f"(measured on {VERSION}, settings changed since) t/s average" in entry["fullDescription"]


def test_bump_notes_say_a_cited_figure_went_stale() -> None:
    mark = STALE_MARK.format(version="1.1.0")
    manifest = ResourceChange(
        "OlaresManifest.yaml",
        "changed",
        ("-    Bench: 223.9 t/s average at 16384 tokens", f"+    Bench: 223.9{mark} t/s average at 32768 tokens"),
    )
    [note] = stale_figures(AppDiff("app", "apps/app.yaml", "1.1.0", "1.2.0", (manifest,)))
    assert note.startswith("apps/app.yaml: OlaresManifest.yaml: the bench figures measured on 1.1.0")
    assert "re-measure them with `olarespack bench run SPEC --url URL --record`" in note


def test_lint_and_build_warn_about_a_stale_record(project: Path, server: FakeServer) -> None:
    spec_file = project / "apps" / "gemma4-dflash.yaml"
    assert _record(project, server)[0] == 0
    spec_file.write_text(spec_file.read_text(encoding="utf-8").replace("max_num_seqs: 4", "max_num_seqs: 2"), "utf-8")
    code, out = run_cli(project, "build")
    assert code == 0
    assert re.search(
        r"WARN apps/gemma4-dflash\.yaml: changelog\[0\]\.bench: the bench figures of "
        rf"{re.escape(VERSION)} .* \[bench-stale\]",
        out,
    )


def test_a_record_never_half_writes_the_spec(project: Path, server: FakeServer) -> None:
    """A spec whose newest entry is not its version, or whose changelog is in flow style, is refused and left as
    it was."""
    spec_file = project / "apps" / "gemma4-dflash.yaml"
    original = spec_file.read_text(encoding="utf-8")
    ahead = original.replace(f"version: {VERSION}\nhardware", "version: 99.0.0\nhardware")
    spec_file.write_text(ahead, encoding="utf-8")
    code, out = _record(project, server)
    assert code == 1 and f"changelog[0].version: the newest changelog entry is {VERSION}" in out
    assert spec_file.read_text(encoding="utf-8") == ahead
    flow = original[: original.index("changelog:")] + f'changelog: [{{version: {VERSION}, note: "First."}}]\n'
    spec_file.write_text(flow, encoding="utf-8")
    code, out = _record(project, server)
    assert code == 1 and "changelog[0].bench: the spec's layout defeats an in-place edit" in out, out
    assert spec_file.read_text(encoding="utf-8") == flow


def test_record_values_round_and_validate() -> None:
    from olarespack.bench.run import Result, Run, Settings
    from olarespack.cli.bench import record_values
    from olarespack.engines.base import DraftCounts

    spec = load_spec(Path("apps/gemma4-vision.yaml"))
    runs = [Run(i, False, 2500, tps, "stream", 10.0, 90.0) for i, tps in enumerate((250.123, 248.0, 253.456), 1)]
    result = Result(
        "http://x", Settings("m", "p", "space-invaders", max_tokens=2500), runs, counts=DraftCounts(29997, 25920)
    )
    values = record_values(spec, result, dt.date(2026, 5, 20))
    assert values["series"] == [250.12, 248.0, 253.46] and values["tps_peak"] == 253.46
    assert values["acceptance"] == 86.4 and values["ttft_ms"] == 90.0
    assert json.dumps(values, default=str)  # plain data


def test_the_settings_hash_leaves_unset_fields_out() -> None:
    """A field olarespack adds later, unset (None) in old specs, must not mark their records stale: no None is
    hashed inside the speed settings (a top-level field the spec leaves unset reads as None either way)."""
    from olarespack.engines import engine_for
    from olarespack.spec.load import load_spec

    def nones(value: object) -> bool:
        if isinstance(value, dict):
            return any(v is None or nones(v) for v in value.values())
        if isinstance(value, list):
            return any(v is None or nones(v) for v in value)
        return False

    apps = Path(__file__).resolve().parents[1] / "apps"
    for name in ("gemma4-audio", "gemma4-vision", "gemma4-dflash"):
        settings = engine_for(load_spec(apps / f"{name}.yaml").engine).speed_settings()
        nested = [value for value in settings.values() if isinstance(value, (dict, list))]
        assert nested and not any(nones(value) for value in nested), name
