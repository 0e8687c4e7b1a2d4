"""Fuzz run of mutated specs against `olarespack build` and `fit` (issue 9's invariants).

    .venv/bin/python benchmarks/fuzz_specs.py [--examples 1000] [--seed N]

The same cases and checks as tests/test_fuzz_specs.py (tests/fuzzing.py), but with a fresh random seed
each run, so every `make bench` explores new inputs. It reports how many mutated specs ran, how they
exited, the tracebacks (0) and the writes outside the output folder (0); on the first violation it prints
the shrunk failing spec and exits 1.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fuzzing import encode, mutated_data, mutated_text, run_case


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="mutated specs to run (values and YAML text)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    args = parser.parse_args()
    chosen = args.seed if args.seed is not None else random.randrange(2**32)
    exits: collections.Counter[int] = collections.Counter()
    workdir = Path(tempfile.mkdtemp(prefix="olarespack-fuzz-"))

    @seed(chosen)
    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(mutated_data().map(lambda c: (c[0], encode(c[1]))), mutated_text()))
    def property_(case: tuple[str, bytes]) -> None:
        exits[run_case(case[0], case[1], workdir).code] += 1

    started = time.perf_counter()
    print(f"fuzz: seed {chosen}, up to {args.examples} mutated specs")
    try:
        property_()
    except AssertionError as exc:
        print(f"FAIL (seed {chosen}): {exc}")
        return 1
    print(
        f"fuzz: {sum(exits.values())} mutated specs in {time.perf_counter() - started:.1f} s; exit codes "
        f"{dict(sorted(exits.items()))}; 0 tracebacks; 0 writes outside the output folder"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
