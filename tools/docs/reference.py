"""The command reference of the docs site, written from the CLI itself (its commands, options and help), so it
cannot drift from what `olarespack --help` says. mkdocs runs it through hooks.py at every build."""

from __future__ import annotations

import click

from olarespack.cli import main


def _commands(
    group: click.Group, ctx: click.Context, path: list[str]
) -> list[tuple[list[str], click.Command, click.Context]]:
    found = []
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        child = click.Context(command, info_name=name, parent=ctx)
        found.append(([*path, name], command, child))
        if isinstance(command, click.Group):
            found += _commands(command, child, [*path, name])
    return found


def commands_markdown() -> str:
    """Every command's `--help`, in order, each under its own heading."""
    root = click.Context(main, info_name="olarespack")
    lines = [
        "# Command reference",
        "",
        "Every command's `--help`, as the installed olarespack prints it (written from the CLI at each build "
        "of this site).",
        "",
        "```text",
        main.get_help(root),
        "```",
        "",
    ]
    for path, command, ctx in _commands(main, root, []):
        lines += [f"## olarespack {' '.join(path)}", "", "```text", command.get_help(ctx), "```", ""]
    return "\n".join(lines)
