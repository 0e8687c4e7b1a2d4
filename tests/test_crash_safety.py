"""kill -9 at any moment of a build or a publish leaves the previous output whole (or the new one), never a
mix; leftovers of a killed run are cleaned by the next one and never taken for input. Real processes, real
SIGKILLs: a worker rewrites the output in a loop and is killed at random moments."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from olarespack.write import _exchange, read_folder, recover, write_chart

ROOT = Path(__file__).resolve().parents[1]
KILLS = 10

CHART_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from olarespack.write import write_chart
    folder = Path(sys.argv[1])
    charts = [{f"f{i}.yaml": f"{tag} {i}\\n" * 200 for i in range(40)} for tag in ("A", "B")]
    Path(sys.argv[2]).write_text("ready")
    n = 0
    while True:
        write_chart(charts[n % 2], folder)
        n += 1
""")

MARKET_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from olarespack import package
    from olarespack.market import catalog as market
    from olarespack.market.folder import write_market
    from olarespack.market.state import load_state
    from olarespack.olares.generations import GENERATION_NAMES
    from olarespack.project import render_apps
    apps = sorted(Path(sys.argv[3]).glob("*.yaml"))
    rendered = {gen: render_apps(apps, [gen]) for gen in GENERATION_NAMES}
    def state(tag):
        archives = {gen: {a.spec.name: package.Archive(f"{a.spec.name}-{a.spec.version}.tgz",
                                                        (tag + a.spec.name).encode() * 1000)
                          for a in found} for gen, found in rendered.items()}
        catalog = market.build_catalog({gen: [market.MarketApp(a.file, a.spec, a.chart,
                                                               archives[gen][a.spec.name].sha256, tag)
                                              for a in found] for gen, found in rendered.items()})
        return archives, catalog
    states = [state("A"), state("B")]
    target = Path(sys.argv[1])
    Path(sys.argv[2]).write_text("ready")
    n = 0
    while True:
        archives, catalog = states[n % 2]
        write_market(target, archives, {}, catalog, load_state)
        n += 1
""")


def kill_at_random(worker: str, *args: str) -> None:
    ready = Path(args[1])
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", worker, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(random.uniform(0.05, 0.6))
        assert proc.poll() is None, "the worker died before the kill: " + (
            proc.stderr.read().decode() if proc.stderr else ""
        )
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_this_machine_swaps_folders_atomically(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    if not _exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("this filesystem has no atomic exchange; the two-rename fallback and recover() apply")
    assert (tmp_path / "b" / "x").read_text() == "a" and not (tmp_path / "a" / "x").exists()


def test_a_killed_build_leaves_a_whole_chart(tmp_path: Path) -> None:
    folder = tmp_path / "charts" / "app"
    seen = set()
    for _ in range(KILLS):
        kill_at_random(CHART_WORKER, str(folder), str(tmp_path / "ready"))
        recover(folder)  # what the next build does first
        files = read_folder(folder)
        tags = {data.split(b" ", 1)[0] for data in files.values()}
        assert len(files) == 40 and len(tags) == 1, sorted(files)
        seen |= tags
        assert [p.name for p in folder.parent.iterdir()] == ["app"]
    write_chart({"done": "x"}, folder)
    assert [p.name for p in folder.parent.iterdir()] == ["app"]


def market_is_consistent(market_dir: Path) -> None:
    """The catalog, the static answers and SHA256SUMS agree with each other and with the archives, and all
    of them come from one publish (archive bytes and icons carry the publish's tag, A or B)."""
    catalog = json.loads((market_dir / "catalog.json").read_bytes())
    tags: set[str] = set()
    for gen, generation in catalog["generations"].items():
        for api in ("v1", "v2"):
            static = json.loads((market_dir / f"static/{gen}/api/{api}/appstore/hash").read_bytes())
            assert static["hash"] == generation["hash"]
            info = json.loads((market_dir / f"static/{gen}/api/{api}/appstore/info").read_bytes())
            assert info["hash"] == generation["hash"] and info["data"]["apps"] == generation["apps"]
        for file_name, sha in generation["archives"].items():
            data = (market_dir / "charts" / gen / file_name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == sha
            tags.add(data[:1].decode())
        tags |= {entry["icon"] for entry in generation["apps"].values()}
    assert len(tags) == 1, tags
    digests = dict(
        reversed(line.split("  ", 1)) for line in (market_dir / "charts/SHA256SUMS").read_text().splitlines()
    )
    for path, sha in digests.items():
        assert hashlib.sha256((market_dir / "charts" / path).read_bytes()).hexdigest() == sha


def test_a_killed_publish_leaves_a_consistent_market(tmp_path: Path) -> None:
    market_dir = tmp_path / "market"
    checked = 0
    for _ in range(KILLS):
        kill_at_random(MARKET_WORKER, str(market_dir), str(tmp_path / "ready"), str(ROOT / "apps"))
        if not (market_dir / "catalog.json").exists():
            continue  # killed before the first publish finished: nothing was there to keep
        market_is_consistent(market_dir)
        checked += 1
        assert sorted(p.name for p in tmp_path.iterdir() if p.name != "ready") in (
            ["market"],
            [".market.olarespack-new", "market"],
        )
    assert checked >= KILLS // 2, "too few kills landed after a first publish to judge"
