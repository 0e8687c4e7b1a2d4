"""The bad-spec corpus: each case is a spec (or a folder of specs) whose header says what is wrong and the
exact rule ids and field paths olarespack must report. Every case exits 1 and leaves charts/ untouched."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import tree_bytes
from olarespack.cli import main

CORPUS = Path(__file__).parent / "bad-specs"
CASES = sorted([p for p in CORPUS.glob("*.yaml")] + [p for p in CORPUS.iterdir() if p.is_dir()])


def case_files(case: Path) -> list[Path]:
    return sorted(case.glob("*.yaml")) if case.is_dir() else [case]


def expected(case: Path) -> set[tuple[str, str, str]]:
    """(file, rule, field path) for every `# expect: RULE PATH` line."""
    found = set()
    for spec in case_files(case):
        for line in spec.read_text(encoding="utf-8", errors="replace").splitlines():
            match = re.match(r"# expect: (\S+) ?(.*)$", line)
            if match:
                found.add((str(spec), match[1], match[2].strip()))
    return found


def reported(output: str, files: list[Path]) -> set[tuple[str, str, str]]:
    found = set()
    for line in output.splitlines():
        if not line.startswith(("ERROR ", "FAIL ")):
            continue
        body = line.split(" ", 1)[1]
        rule = re.search(r"\[([\w-]+)\]$", body)
        file = next((str(f) for f in files if body.startswith(f"{f}: ")), None)
        if rule and file:
            rest = body[len(file) + 2 :]
            path = rest.split(": ", 1)[0] if ": " in rest.split(" (fix:")[0] else ""
            found.add((file, rule[1], path))
    return found


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        assert expected(case), f"{case} has no # expect: line"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_bad_spec_fails_as_specified(case: Path, project: Path) -> None:
    files = case_files(case)
    charts = project / "charts"
    before = tree_bytes(charts)

    code, output = invoke("build", *map(str, files), "--out", str(charts))
    assert code == 1, output
    assert reported(output, files) == expected(case), output
    assert "nothing was written" in output
    assert tree_bytes(charts) == before

    old = os.getcwd()
    os.chdir(project)
    try:
        code, output = invoke("lint", *map(str, files))
    finally:
        os.chdir(old)
    assert code == 1, output
    assert reported(output, files) == expected(case), output
    assert tree_bytes(charts) == before
