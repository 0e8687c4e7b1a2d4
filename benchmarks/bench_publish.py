"""How much of a publish an unchanged republish costs.

Copies the seed specs under N distinct names into a scratch project (N = 30 by default: the issue's
30-app market), publishes them to an empty market folder with the real `olarespack publish` (helm 3 and 4),
then publishes again with nothing changed, and prints both times and their ratio. An unchanged republish
renders every app but neither lints nor packages any (their charts match the published archives), so the
target is a ratio of at most 0.25.

    .venv/bin/python benchmarks/bench_publish.py [--apps 30] [--check]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 0.25


def make_project(folder: Path, count: int) -> None:
    seeds = sorted((ROOT / "apps").glob("*.yaml"))
    (folder / "apps").mkdir(parents=True)
    for i in range(count):
        seed = seeds[i % len(seeds)]
        text = seed.read_text(encoding="utf-8")
        name = re.search(r"^name: (\S+)$", text, re.M)
        assert name is not None
        new = f"{name[1][:25]}{i:05d}"
        (folder / "apps" / f"{new}.yaml").write_text(text.replace(f"name: {name[1]}", f"name: {new}"), encoding="utf-8")


def publish(project: Path) -> float:
    olarespack = str(Path(sys.executable).parent / "olarespack")
    start = time.perf_counter()
    proc = subprocess.run(
        [olarespack, "publish", "--market-dir", "market"], cwd=project, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"publish failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=30)
    parser.add_argument("--check", action="store_true", help=f"exit 1 when the ratio is above {RATIO_TARGET}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="olarespack-bench-publish-") as tmp:
        project = Path(tmp)
        make_project(project, args.apps)
        first = publish(project)
        catalog = (project / "market" / "catalog.json").read_bytes()
        again = publish(project)
        unchanged = (project / "market" / "catalog.json").read_bytes() == catalog
        shutil.rmtree(project / "market")
    ratio = again / first
    print(
        f"apps: {args.apps}; first publish {first:.2f} s; unchanged republish {again:.2f} s; "
        f"ratio {ratio:.3f} (target <= {RATIO_TARGET}); catalog unchanged: {unchanged}"
    )
    ok = ratio <= RATIO_TARGET and unchanged
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
