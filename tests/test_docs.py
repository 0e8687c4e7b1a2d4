"""The manual: the docs site builds with --strict (a broken link, anchor or nav entry fails), its command
reference is the CLI's own help, and every command example in it and in the README names a command and
options the CLI has."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from conftest import ROOT
from olarespack.cli import main

PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
_CALL = re.compile(r"^(?:\$ )?(?:[.~\w/-]*/)?olarespack (.*)$")


def examples() -> list[tuple[str, str]]:
    """(page, command line) of every `olarespack ...` line in a fenced block, continuation lines joined."""
    found = []
    for page in PAGES:
        for block in _FENCE.findall(page.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                match = _CALL.match(line.strip())
                if match:
                    found.append((page.name, match.group(1)))
    return found


def resolve(words: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The command the words name, its path, and the words left for it."""
    command: click.Command = main
    path: list[str] = []
    ctx = click.Context(main, info_name="olarespack")
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(ctx, words[0])
        if sub is None:
            break
        path.append(words.pop(0))
        command = sub
        ctx = click.Context(command, info_name=path[-1], parent=ctx)
    return command, path, words


def test_the_manual_has_command_examples() -> None:
    assert len(examples()) >= 20


@pytest.mark.parametrize(("page", "line"), examples(), ids=lambda value: str(value)[:60])
def test_an_example_names_a_real_command_and_its_options(page: str, line: str) -> None:
    words = shlex.split(line, comments=True)
    command, path, rest = resolve(words)
    assert path, f"{page}: `olarespack {line}` names no command"
    assert not isinstance(command, click.Group), f"{page}: `olarespack {line}` stops at the group {path}"
    known = {"--help", "-h"} | {
        name
        for param in command.params
        if isinstance(param, click.Option)
        for name in (*param.opts, *param.secondary_opts)
    }
    options = (
        [word.split("=", 1)[0] for word in rest[: rest.index("--")] if "--" in rest]
        if "--" in rest
        else [word.split("=", 1)[0] for word in rest]
    )
    unknown = [
        word
        for word in options
        if word.startswith("-") and len(word) > 1 and not word[1].isdigit() and word not in known
    ]
    assert not unknown, f"{page}: `olarespack {line}`: {unknown} are not options of `olarespack {' '.join(path)}`"


def test_the_site_builds_strictly_with_the_clis_own_reference(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed: `make build` installs it (the dev extras)")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reference = (tmp_path / "site" / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    for path in ("market check", "market clone-check", "publish", "bench"):
        assert f"olarespack {path}" in reference
    assert "--other-source" in reference  # an option as the CLI declares it today
