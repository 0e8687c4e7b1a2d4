"""How much olarespack adds to the helm calls a lint needs.

Renders a tree of N charts (the seed apps under N distinct names), lints it once while recording every
helm process the lint starts (its arguments and the values it hands over), then times, on the same tree and
with the same parallelism: (1) those very helm processes replayed bare, their values files written before
the clock starts, and (2) `olarespack lint` of the tree, everything included (reading the charts, the pure
rules, the values, the output parsing, the Olares, probe, scale-to-zero and schema rules). So the baseline
is exactly the helm work the lint needs, whatever rules add helm calls, and nothing of olarespack's own.

Prints both, their ratio, the ratio of CPU time spent (helm's and this process's, steadier than wall time
on a shared machine), and whether the targets hold: ratio <= 1.05 (Python overhead under 5%) and N=300
charts in under 45 s on 2 cores.

    .venv/bin/python benchmarks/bench_lint.py [--charts 300] [--jobs 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from olarespack.check.lint import lint
from olarespack.helm import HelmBinary, HelmResult
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 1.05
TREE_TARGET_SECONDS = 45.0
Invocation = tuple[HelmBinary, tuple[str, ...], dict[int, str]]  # helm, its arguments, values files by position


def make_tree(folder: Path, count: int) -> None:
    specs = [load_spec(p) for p in sorted((ROOT / "apps").glob("*.yaml"))]
    for i in range(count):
        spec = specs[i % len(specs)]
        name = f"{spec.name[:26]}{i:04d}"
        renamed = spec.model_copy(update={"name": name})
        write_chart(render_chart(renamed, f"bench/{name}.yaml"), folder / name)


def record(helms: list[HelmBinary], into: list[Invocation]) -> Callable[[], None]:
    """Every helm process the helms start from now on, appended to `into`; the returned call stops it."""
    lock = threading.Lock()

    def recording(helm: HelmBinary, run: Callable[..., HelmResult]) -> Callable[..., HelmResult]:
        def wrapped(*args: str) -> HelmResult:
            values = {i: Path(args[i + 1]).read_text("utf-8") for i, arg in enumerate(args[:-1]) if arg == "--values"}
            with lock:
                into.append((helm, args, values))
            return run(*args)

        return wrapped

    for helm in helms:
        helm._run = recording(helm, helm._run)  # type: ignore[method-assign]

    def stop() -> None:
        for helm in helms:
            del helm._run  # the class's own again

    return stop


def bare_helm_seconds(invocations: list[Invocation], jobs: int, scratch: Path) -> float:
    """The recorded helm processes, bare: values files written beforehand, no output read back."""
    calls: list[tuple[HelmBinary, list[str]]] = []
    for n, (helm, args, values) in enumerate(invocations):
        argv = list(args)
        for position, text in values.items():
            path = scratch / f"{n}-{position}.yaml"
            path.write_text(text, encoding="utf-8")
            argv[position + 1] = str(path)
        calls.append((helm, argv))
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda call: call[0]._run(*call[1]), calls))
    return time.perf_counter() - start


def lint_seconds(tree: Path, helms: list[HelmBinary], jobs: int) -> tuple[float, int]:
    start = time.perf_counter()
    report = lint([str(tree)], helms, jobs)
    return time.perf_counter() - start, len(report.errors)


def cpu_seconds() -> tuple[float, float]:
    """(this process's CPU time, its finished children's: the helm processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    """run's result and the CPU time it took, helm's included."""
    before = sum(cpu_seconds())
    result = run()
    return result, sum(cpu_seconds()) - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--charts", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs of each; the best is kept")
    args = parser.parse_args()
    helms = [HelmBinary(name="helm"), HelmBinary(name="helm4")]
    with tempfile.TemporaryDirectory(prefix="olarespack-bench-") as tmp:
        tree, scratch = Path(tmp) / "charts", Path(tmp) / "values"
        scratch.mkdir()
        make_tree(tree, args.charts)
        invocations: list[Invocation] = []
        stop = record(helms, invocations)
        lint_seconds(tree, helms, args.jobs)  # warms the page cache and the schema validators, and records
        stop()
        # alternate the two and keep each one's best run, so a busy moment does not land on one side only
        bare_runs: list[float] = []
        lint_runs: list[tuple[float, int]] = []
        bare_cpu: list[float] = []
        lint_cpu: list[float] = []
        for _ in range(args.repeat):
            seconds, cpu = timed(lambda: bare_helm_seconds(invocations, args.jobs, scratch))
            bare_runs.append(seconds)
            bare_cpu.append(cpu)
            result, cpu = timed(lambda: lint_seconds(tree, helms, args.jobs))
            lint_runs.append(result)
            lint_cpu.append(cpu)
        bare = min(bare_runs)
        total, errors = min(lint_runs)
    ratio = total / bare
    cpu_ratio = statistics.median(lint_cpu) / statistics.median(bare_cpu)
    print(
        f"charts: {args.charts}, jobs: {args.jobs}, helm: {', '.join(h.version for h in helms)}, "
        f"helm processes: {len(invocations)}"
    )
    print(
        f"bare helm invocations: {bare:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in bare_runs)}; "
        f"CPU: {', '.join(f'{t:.1f}' for t in bare_cpu)})"
    )
    print(
        f"olarespack lint:       {total:7.2f} s  ({errors} errors; runs: "
        f"{', '.join(f'{t:.2f}' for t, _ in lint_runs)}; CPU: {', '.join(f'{t:.1f}' for t in lint_cpu)})"
    )
    print(f"ratio lint / bare helm: {ratio:.3f}  (target <= {RATIO_TARGET}); CPU time: {cpu_ratio:.3f}")
    ok = ratio <= RATIO_TARGET and errors == 0
    if args.charts >= 300:
        scaled = total * 300 / args.charts
        print(f"300 charts: {scaled:.1f} s  (target < {TREE_TARGET_SECONDS:.0f} s)")
        ok = ok and scaled < TREE_TARGET_SECONDS
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
