"""Where a chart's downloader fetches the model files from: the URLs its scripts fetch, with the variables the
script gets (its ConfigMap and env, `${VAR:-default}`, its own top-level assignments) filled in, so that
`curl "https://huggingface.co/${TARGET_MODEL}/resolve/main/${TARGET_FILE}"` names its repository file as plainly
as a literal URL in a ConfigMap does. Nothing is run: a value only running the script would give stays unknown,
and its URL is not read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from olarespack.engines.importing import HF_URL
from olarespack.importer.argv import (
    _ASSIGNMENT,
    MAX_SCRIPT_BYTES,
    ContainerEnv,
    _expand_k8s,
    _logical_lines,
    script_of,
)
from olarespack.importer.shell_words import MAX_EXPANSION, brace_pairs, parameter

MAX_URL_LINES = 256  # a downloader fetches a few files; more lines naming URLs are not read


def expand_text(text: str, values: Mapping[str, str]) -> str:
    """`text` with its shell parameters ($VAR, ${VAR}, ${VAR:-default}) filled in from `values`, words not
    split; an unknown one stays as written (so nothing is guessed). Bounded like a command line."""
    out: list[str] = []
    pairs = brace_pairs(text)
    i = size = 0
    while i < len(text) and size <= MAX_EXPANSION:
        if text[i] == "$":
            missing: list[str] = []
            value, used = parameter(text, i, values, missing, 0, pairs)
            if used:
                piece = text[i : i + used] if missing else value
                out.append(piece)
                size += len(piece)
                i += used
                continue
        out.append(text[i])
        size += 1
        i += 1
    return "".join(out)[:MAX_EXPANSION]


def script_urls(
    container: Mapping[str, Any], env: ContainerEnv, files: Mapping[str, str], label: str
) -> dict[str, str]:
    """`<label>:line N` -> that script line with its variables filled in, for every line of the container's
    shell script that names a download URL (`resolve/`), in the form remote_files() reads env values."""
    items = [
        _expand_k8s(str(x), env.values) for x in [*(container.get("command") or []), *(container.get("args") or [])]
    ]
    script, _ = script_of(items, files)
    if script is None or len(script.encode()) > MAX_SCRIPT_BYTES:
        return {}
    values = dict(env.values)
    found: dict[str, str] = {}
    for number, raw in enumerate(_logical_lines(script), 1):
        line = raw.strip()
        assignment = _ASSIGNMENT.match(line)
        if assignment and "$(" not in line and "`" not in line:
            # a top-level or branch assignment: its value, quotes removed, as the later lines see it
            values[assignment.group(1)] = expand_text(assignment.group(2), values).strip("\"'")
        if "resolve/" in line and len(found) < MAX_URL_LINES:
            expanded = expand_text(line, values)
            urls = [m.group(0) for m in HF_URL.finditer(expanded)]
            # a URL still holding a parameter depends on what only running the script tells: not read
            known = [url for url in urls if "$" not in url and "`" not in url]
            if known:
                found[f"{label}:line {number}"] = " ".join(known)
    return found
