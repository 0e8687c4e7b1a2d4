"""How much olarespack adds to the helm calls a lint needs.

Renders a tree of N charts (the seed apps under N distinct names), then times, on the same tree and with
the same parallelism: (1) the bare helm invocations olarespack's lint makes (`helm lint --strict` with
Helm 3 and Helm 4, `helm template` with Helm 3), and (2) `olarespack lint` of the tree, everything
included. Prints both, their ratio, and whether the targets hold: ratio <= 1.2 (Python overhead under
20%) and N=300 charts in under 45 s on 2 cores.

    .venv/bin/python benchmarks/bench_lint.py [--charts 300] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from olarespack.check.lint import LintReport, collect, helm_calls, lint
from olarespack.helm import HelmBinary
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 1.2
TREE_TARGET_SECONDS = 45.0


def make_tree(folder: Path, count: int) -> None:
    specs = [load_spec(p) for p in sorted((ROOT / "apps").glob("*.yaml"))]
    for i in range(count):
        spec = specs[i % len(specs)]
        name = f"{spec.name[:26]}{i:04d}"
        renamed = spec.model_copy(update={"name": name})
        write_chart(render_chart(renamed, f"bench/{name}.yaml"), folder / name)


def bare_helm_seconds(tree: Path, helms: list[HelmBinary], jobs: int) -> float:
    with ExitStack() as stack:
        calls = helm_calls(collect([str(tree)], stack, LintReport()), helms)
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(lambda call: call.run(), calls))
        return time.perf_counter() - start


def lint_seconds(tree: Path, helms: list[HelmBinary], jobs: int) -> tuple[float, int]:
    start = time.perf_counter()
    report = lint([str(tree)], helms, jobs)
    return time.perf_counter() - start, len(report.errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--charts", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs of each; the best is kept")
    args = parser.parse_args()
    helms = [HelmBinary(name="helm"), HelmBinary(name="helm4")]
    with tempfile.TemporaryDirectory(prefix="olarespack-bench-") as tmp:
        tree = Path(tmp) / "charts"
        make_tree(tree, args.charts)
        lint_seconds(tree, helms, args.jobs)  # warm the page cache and the schema validators
        # alternate the two and keep each one's best run, so a busy moment does not land on one side only
        bare_runs, lint_runs = [], []
        for _ in range(args.repeat):
            bare_runs.append(bare_helm_seconds(tree, helms, args.jobs))
            lint_runs.append(lint_seconds(tree, helms, args.jobs))
        bare = min(bare_runs)
        total, errors = min(lint_runs)
    ratio = total / bare
    print(f"charts: {args.charts}, jobs: {args.jobs}, helm: {', '.join(h.version for h in helms)}")
    print(f"bare helm invocations: {bare:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in bare_runs)})")
    print(f"olarespack lint:       {total:7.2f} s  ({errors} errors; runs: "
          f"{', '.join(f'{t:.2f}' for t, _ in lint_runs)})")
    print(f"ratio lint / bare helm: {ratio:.3f}  (target <= {RATIO_TARGET})")
    ok = ratio <= RATIO_TARGET and errors == 0
    if args.charts >= 300:
        scaled = total * 300 / args.charts
        print(f"300 charts: {scaled:.1f} s  (target < {TREE_TARGET_SECONDS:.0f} s)")
        ok = ok and scaled < TREE_TARGET_SECONDS
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
