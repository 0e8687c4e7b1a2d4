"""`--plot FILE.png` draws the measured runs: a real PNG (signature, header, a picture's size), written in one
rename, from the bench the command ran; and the figure shows a cycle of fast and slow runs as distinct points."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from conftest import APPS, run_cli
from olarespack.bench.plot import plot_png
from olarespack.bench.run import Result, Run, Settings
from test_bench_client import FakeServer, metrics, models, vllm_like

PNG = b"\x89PNG\r\n\x1a\n"


def size_of(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_seed_cycle_is_drawn() -> None:
    # the DFlash post's ten runs: five fast, one transition, three slow, one recovered
    rates = [221, 214, 218, 222, 230, 103, 59, 62, 62, 212]
    runs = [Run(i, False, 2000, float(tps), "stream", 9.0) for i, tps in enumerate(rates, 1)]
    result = Result("http://x", Settings("m", "p", "space-invaders"), runs, [Run(1, True, 2000, 219.0, "stream", 9.0)])
    data = plot_png(result, "vllmgemma4dflashone 1.0.4: n_spec 8")
    assert size_of(data) == (800, 450) and len(data) > 10_000
    assert "matplotlib.pyplot" in sys.modules and sys.modules["matplotlib"].get_backend().lower() == "agg"


def test_bench_plot_writes_a_png(tmp_path: Path) -> None:
    counts = {"drafted": 0, "accepted": 0}
    server = FakeServer(
        {"GET /v1/models": models(), "POST /v1/chat/completions": vllm_like(counts), "GET /metrics": metrics(counts)}
    )
    try:
        target = tmp_path / "runs.png"
        code, out = run_cli(
            None,
            "bench",
            "run",
            str(APPS / "gemma4-vision.yaml"),
            "--url",
            server.url,
            "--runs",
            "4",
            "--warmups",
            "1",
            "--max-tokens",
            "30",
            "--plot",
            str(target),
        )
    finally:
        server.stop()
    assert code == 0, out
    assert f"ok {target}: the runs drawn" in out
    assert size_of(target.read_bytes()) == (800, 450) and target.stat().st_size > 10_000
    assert [p.name for p in tmp_path.iterdir()] == ["runs.png"]  # no temp file left beside it


def test_other_commands_do_not_import_the_plot_or_http_libraries() -> None:
    import subprocess

    code = (
        "import sys; from click.testing import CliRunner; from olarespack.cli import main; "
        "CliRunner().invoke(main, ['lint', '--rules']); "
        "print(sorted(m for m in ('matplotlib', 'httpx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
