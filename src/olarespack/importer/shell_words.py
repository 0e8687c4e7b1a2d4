"""A shell line's words as the shell makes them (importer/argv.py reads wrapper scripts with it): parameter
expansion ($VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, nested to MAX_NESTING levels), quotes, command
substitutions left unexpanded and named, every expansion bounded (MAX_EXPANSION)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

MAX_EXPANSION = 64 * 1024  # a value grown past this by expansion is a trap, not a command line
MAX_NESTING = 8  # ${A:-${B:-...}} levels evaluated; deeper is reported
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shell_words(text: str, values: Mapping[str, str], level: int = 0) -> tuple[list[str], list[str]]:
    """A shell line's words after parameter expansion: $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}; in
    single quotes nothing expands. Unquoted expansions split on spaces, as the shell does."""
    missing: list[str] = []
    out: list[str] = []
    pairs = brace_pairs(text)
    size = 0  # characters in out, kept as it grows: summing them each time would be quadratic
    i = 0
    quote: str | None = None
    too_long = [f"the line grows past {MAX_EXPANSION} characters when expanded"]
    while i < len(text):
        char = text[i]
        if quote != "'" and (text.startswith("$(", i) or char == "`"):
            end = _substitution_end(text, i)
            missing.append(f"{text[i:end][:60]} (a command substitution: known only by running the script)")
            i = end
            continue
        if quote != "'" and char == "$":
            value, used = parameter(text, i, values, missing, level, pairs)
            if used:
                piece = _fields(value) if quote is None else value.replace("\\", "\\\\").replace('"', '\\"')
                out.append(piece)
                size += len(piece)
                if size > MAX_EXPANSION:
                    return [], too_long
                i += used
                continue
        if char == "\\" and quote != "'" and i + 1 < len(text):
            out.append(text[i : i + 2])
            size += 2
            i += 2
            continue
        if char in "'\"" and (quote is None or quote == char):
            quote = None if quote == char else char
        elif char == "#" and quote is None and (i == 0 or text[i - 1].isspace()):
            break  # a comment
        elif char in ";&|<>" and quote is None:
            break  # the command ends (redirections and further commands are not the server's args)
        out.append(char)
        size += 1
        i += 1
        if size > MAX_EXPANSION:
            return [], too_long
    try:
        return shlex.split("".join(out)), missing
    except ValueError as exc:
        return [], [f"the line does not parse as shell words ({exc})"]


def _fields(value: str) -> str:
    """An unquoted expansion as shell words: split on blanks into literal words (quotes and backslashes in
    the value are its own characters); an empty value is no word at all."""
    words = value.split()
    piece = " ".join(shlex.quote(word) for word in words)
    if not words:
        return " " if value else ""
    return (" " if value[0].isspace() else "") + piece + (" " if value[-1].isspace() else "")


def _substitution_end(text: str, i: int) -> int:
    """Where the command substitution $(...) or `...` starting at text[i] ends (the text's end if never)."""
    if text[i] == "`":
        close = text.find("`", i + 1)
        return len(text) if close < 0 else close + 1
    depth = 0
    for j in range(i + 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j + 1
    return len(text)


def brace_pairs(text: str) -> dict[int, int]:
    """Where each ${ of the text is closed (nested ones counted), found in one pass."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    i = 0
    while i < len(text):
        if text.startswith("${", i):
            opened.append(i)
            i += 2
            continue
        if text[i] == "}" and opened:
            pairs[opened.pop()] = i
        i += 1
    return pairs


def parameter(
    text: str, i: int, values: Mapping[str, str], missing: list[str], level: int, pairs: dict[int, int]
) -> tuple[str, int]:
    """One $-expansion at text[i]: its value and how many characters it took (0: not an expansion)."""
    if text.startswith("${", i):
        end = pairs.get(i, -1)
        if end < 0:
            return "", 0
        if level >= MAX_NESTING:
            missing.append(f"an expansion nested over {MAX_NESTING} levels (not evaluated)")
            return "", end + 1 - i
        body = text[i + 2 : end]
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)(.*))?", body, re.S)
        if not match:
            missing.append(f"${{{body}}} (a shell expansion olarespack does not evaluate)")
            return "", end + 1 - i
        name, op, default = match.groups()
        if op is not None:
            present = name in values and (op == "-" or values[name] != "")
            if present:
                return values[name], end + 1 - i
            words, more = shell_words(default or "", values, level + 1)
            missing += more
            return " ".join(words), end + 1 - i
        if name not in values:
            missing.append(f"${name} (not set in the container's env or the script)")
        return values.get(name, ""), end + 1 - i
    match = _NAME.match(text, i + 1)
    if not match:
        return "", 0
    name = match.group(0)
    if name not in values:
        missing.append(f"${name} (not set in the container's env or the script)")
    return values.get(name, ""), match.end() - i
