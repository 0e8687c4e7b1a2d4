"""Mutated specs for the property-based tests and the fuzz benchmark: the seed specs with hostile values
put anywhere (types, sizes, unicode, template text, YAML tricks), and one run of the CLI on each with the
invariants issue 9 asks for checked."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import strategies as st

from conftest import APPS, CHARTS, tree_bytes
from olarespack.cli import main

SEED_TEXTS = {p.name: p.read_text(encoding="utf-8") for p in sorted(APPS.glob("*.yaml"))}
SEED_DATA = {name: yaml.safe_load(text) for name, text in SEED_TEXTS.items()}

HOSTILE_TEXTS = [
    "[[ cycler.__init__.__globals__.os.popen('id').read() ]]",
    "[[ 'x' * (10**10) ]]",
    "[[ range(10**12) | list ]]",
    "[[ engine.max_model_len * 999999999999 * 999999999999 ]]",
    "{{ .Values.os.appSecret }}",
    "[[ '{' ]]{ x }}",
    "[% for x in y %]",
    "[# c #]",
    "]] [[",
    "\x00olarespack\x00",
    "\x1b[2J",
    "\u202e",
    "\ud800",
    "hf_" + "A" * 34,
    "Bearer abcdefghijklmnopqrstuvwxyz",
    "$(HF_TOKEN)",
    "../../etc/passwd",
    "-" * 5000,
    "é" * 3000,
    "yes",
    "0755",
    "1e3",
    "~",
    "null",
    "2026-02-30",
    "'",
    '"',
    "\\",
    "a: b",
    "- x",
    "&a",
    "*a",
    "!!python/object:os.system",
    "\t",
    "\r\n",
    "<script>",
    "%",
    "{",
    "}}",
]


def hostile_values(depth: int = 2) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.sampled_from(HOSTILE_TEXTS),
        st.text(max_size=80),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([0, -1, 1, 2**31, 2**63, 2**64, 10**30]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
        st.builds(lambda t, n: f"[[ {t} ]]" * n, st.text(max_size=30), st.integers(1, 3)),
    )
    if depth <= 0:
        return scalars
    inner = hostile_values(depth - 1)
    return st.one_of(scalars, st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4))


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += _paths(value, (*prefix, i))
    return found


@st.composite
def mutated_data(draw: st.DrawFn) -> tuple[str, Any]:
    """A seed spec's data with one to three values replaced, removed or added."""
    name = draw(st.sampled_from(sorted(SEED_DATA)))
    data = copy.deepcopy(SEED_DATA[name])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=20))] = draw(hostile_values())
        else:
            parent[path[-1]] = draw(hostile_values())
        if not isinstance(data, dict):
            break
    return name, data


YAML_TRICKS = [
    "a: &x [1, 2]\nb: *x\n",
    "<<: {name: x}\n",
    "--- {}\n--- {}\n",
    "\ufeff",
    "%YAML 1.1\n---\n",
    "!!binary aGVsbG8=",
    "[" * 500 + "]" * 500,
    "? [a]\n: b\n",
    "x: !!python/name:os.system\n",
    "\t",
    "{",
    "'",
    "name: x\nname: y\n",
]


@st.composite
def mutated_text(draw: st.DrawFn) -> tuple[str, bytes]:
    """A seed spec's YAML text cut, spliced with YAML tricks or re-encoded."""
    name = draw(st.sampled_from(sorted(SEED_TEXTS)))
    text = SEED_TEXTS[name]
    position = draw(st.integers(0, len(text)))
    insert = draw(st.one_of(st.sampled_from(YAML_TRICKS), st.text(max_size=40)))
    cut = draw(st.integers(0, 40))
    text = text[:position] + insert + text[position + cut :]
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "latin-1"]))
    return name, text.encode(encoding, errors="replace")


def encode(data: Any) -> bytes:
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8", errors="surrogatepass")
    except (yaml.YAMLError, RecursionError):
        return repr(data).encode("utf-8", errors="surrogatepass")


@dataclass
class Outcome:
    code: int
    output: str


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
        for p in sorted(folder.rglob("*"))
    }


def _seed_chart(spec_name: str) -> str:
    data = SEED_DATA[spec_name]
    return str(data["name"])


def run_case(spec_name: str, spec_bytes: bytes, workdir: Path) -> Outcome:
    """Build one mutated spec in a fresh project (the spec and its seed's chart); assert issue 9's
    invariants; return what happened."""
    project = workdir / "project"
    scratch = workdir / "tmp"
    for folder in (project, scratch):
        if folder.exists():
            shutil.rmtree(folder)
    scratch.mkdir(parents=True)
    (project / "apps").mkdir(parents=True)
    chart = _seed_chart(spec_name)
    shutil.copytree(CHARTS / chart, project / "charts" / chart)
    (project / "apps" / spec_name).write_bytes(spec_bytes)
    before = _snapshot(project)
    charts_before = tree_bytes(project / "charts")

    old_cwd, old_tmp = os.getcwd(), tempfile.tempdir
    os.chdir(project)
    tempfile.tempdir = str(scratch)
    try:
        runner = CliRunner()
        result = runner.invoke(main, ["build"], catch_exceptions=True)
        fit = runner.invoke(main, ["fit", f"apps/{spec_name}", "--json"], catch_exceptions=True)
        check = runner.invoke(main, ["build", "--check"], catch_exceptions=True) if result.exit_code == 0 else None
    finally:
        os.chdir(old_cwd)
        tempfile.tempdir = old_tmp

    for outcome in (result, fit):
        output = outcome.stdout + outcome.stderr
        assert outcome.exception is None or isinstance(outcome.exception, SystemExit), repr(outcome.exception)
        assert outcome.exit_code in (0, 1, 2), output
        assert "Traceback" not in output and "internal error" not in output, output
    after = _snapshot(project)
    outside = {k: v for k, v in after.items() if not k.startswith("charts")}
    assert outside == {k: v for k, v in before.items() if not k.startswith("charts")}, "wrote outside charts/"
    assert not any(scratch.iterdir()), "wrote temporary files"
    if result.exit_code == 0:
        # the new charts are exactly what the specs render (a renamed app leaves its old chart as an orphan)
        assert check is not None and "DRIFT" not in check.stdout + check.stderr, "charts/ differs from the specs"
    else:
        assert tree_bytes(project / "charts") == charts_before, "a failed build changed charts/"
    assert not [p for p in (project / "charts").iterdir() if p.name.startswith(".")], "leftovers"
    return Outcome(result.exit_code, result.stdout + result.stderr)
