"""What every engine's importer shares: a server's command line is read back into an engine spec, each flag
the engine's flag table knows setting its field, every other flag passing through in extra_args, and what the
spec cannot say returned by name. Here: the option parsing, the download URLs a chart carries (the files a
spec names come from them), and the result; each engine package reads its own fields (its importer.py)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from olarespack.engines.base import EngineSpec, Option

HF_URL = re.compile(
    r"https?://[^/\s\"']+/(?P<repo>[A-Za-z0-9._-]+/[A-Za-z0-9._-]+)/resolve/"
    r"(?P<revision>[A-Za-z0-9._-]+)/(?P<path>[^\s\"'?#]+)"
)
# table flags that take no value although the field they belong to is not a boolean
VALUELESS = frozenset({"--enable-auto-tool-choice"})
ParsedOption = tuple[str, str | None, Option | None]  # (spelling, value, table row)


@dataclass(frozen=True)
class RemoteFile:
    repo: str
    revision: str
    path: str  # in the repository


@dataclass(frozen=True)
class ImportSource:
    """What a chart carries besides the server's command line that an engine's importer may read."""

    files: Mapping[str, RemoteFile] = field(default_factory=dict)  # local file name -> where it was downloaded
    texts: Mapping[str, str] = field(default_factory=dict)  # file name -> what the chart writes into the pod


@dataclass
class EngineImport:
    kind: str
    data: dict[str, Any]  # the engine block of the spec, loosely typed (validated by the caller)
    unexpressed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def remote_files(env_values: Mapping[str, str]) -> dict[str, RemoteFile]:
    """Local file name -> the repository file it was downloaded from, from every download URL in the chart's
    env and ConfigMaps. A `<X>_URL` next to a `<X>_FILE` names the local file (it may be saved under another
    name); otherwise the URL's own file name is the local one."""
    found: dict[str, RemoteFile] = {}
    for name, value in sorted(env_values.items()):
        match = HF_URL.search(value)
        if not match:
            continue
        remote = RemoteFile(match["repo"], match["revision"], match["path"])
        found.setdefault(posixpath.basename(match["path"]), remote)
        for suffix in ("_URL", "_LINK"):
            if name.endswith(suffix):
                local = env_values.get(name[: -len(suffix)] + "_FILE")
                if local:
                    found[posixpath.basename(local)] = remote
    return found


def flag_spellings(flags: Sequence[Option]) -> dict[str, Option]:
    return {spelling: flag for flag in flags for spelling in flag.spellings() if spelling}


def _takes_value(flag: Option | None, token: str, following: str | None, model: type[EngineSpec]) -> bool:
    if flag is not None:
        if flag.style == "switch" or token.startswith("--no-") or token in VALUELESS:
            return False
        if flag.style == "given" and _is_bool_field(model, flag.owner):
            return False
    # a flag followed by another flag has no value (`-fa --jinja` is not -fa set to --jinja)
    return following is not None and (
        not following.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", following) is not None
    )


def _is_bool_field(model: type[EngineSpec], owner: str) -> bool:
    parts = owner.split(".")[1:]
    current: Any = model  # a pydantic model class, then the class of a nested block
    for part in parts:
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            return False
        annotation = info.annotation
        args = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not type(None)]
        if len(parts) > 1 and part != parts[-1]:
            current = args[0]
            continue
        return args == [bool]
    return False


def parse_options(argv: list[str], flags: Mapping[str, Option], model: type[EngineSpec]) -> list[ParsedOption]:
    """(spelling, value, table row) for each option; `--flag=value` split; positionals as ("", value)."""
    out: list[ParsedOption] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-") or token == "-":
            out.append(("", token, flags.get("")))
            i += 1
            continue
        spelling, inline = token, None
        if token.startswith("--") and "=" in token:
            spelling, inline = token.split("=", 1)
        flag = flags.get(spelling)
        if inline is not None:
            out.append((spelling, inline, flag))
            i += 1
        elif _takes_value(flag, spelling, argv[i + 1] if i + 1 < len(argv) else None, model):
            out.append((spelling, argv[i + 1] if i + 1 < len(argv) else None, flag))
            i += 2
        else:
            out.append((spelling, None, flag))
            i += 1
    return out


def set_field(data: dict[str, Any], owner: str, value: Any) -> None:
    parts = owner.split(".")[1:]
    for part in parts[:-1]:
        data = data.setdefault(part, {})
    data[parts[-1]] = value


def switch_value(spelling: str, flag: Option, value: str | None) -> str | bool:
    if flag.style == "switch":
        return not spelling.startswith("--no-")
    return True if value is None else value


def extra_items(spelling: str, value: str | None) -> list[str]:
    """An option the table does not know, as the command line had it: a positional ("" spelling) alone."""
    return [item for item in (spelling or None, value) if item is not None]


def unset_defaults(
    result: EngineImport, options: list[ParsedOption], table: Sequence[Option], model: type[EngineSpec]
) -> None:
    """What the chart leaves to the server's own default stays unwritten: a table field whose default the
    spec's chart would write (vLLM's --kv-cache-dtype auto, llama.cpp's -ngl 99) is set to null (not set);
    a field the spec must give is named."""
    seen = {flag.owner for _, _, flag in options if flag is not None}
    for flag in table:
        parts = flag.owner.split(".")[1:]
        if flag.owner == "chart" or flag.owner in seen or len(parts) != 1 or parts[0] in result.data:
            continue
        info = model.model_fields.get(parts[0])
        if info is None:
            continue
        if info.is_required():
            result.unexpressed.append(
                f"{flag.flag or 'the model'}: the chart leaves it to the server's default; "
                f"the spec must give engine.{parts[0]}"
            )
            continue
        default = info.get_default(call_default_factory=True)
        if default is None or default is False or (flag.style == "given" and default == ""):
            continue  # nothing written for it
        if type(None) in get_args(info.annotation):
            result.data[parts[0]] = None
        else:
            result.unexpressed.append(
                f"{flag.flag}: the chart does not write it; the spec's chart always writes {flag.flag} {default}"
            )


def chart_option(result: EngineImport, spelling: str, value: str | None, default_port: int) -> None:
    """--host and --port, which the spec's chart sets: another port is kept (clients call it), another host
    is named."""
    if spelling == "--host" and value != "0.0.0.0":
        result.unexpressed.append(f"--host {value}: the chart listens on 0.0.0.0")
    elif spelling == "--port" and value and value != str(default_port):
        result.data["port"] = value
