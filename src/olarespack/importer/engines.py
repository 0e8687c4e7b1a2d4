"""A server's command line, read back into an engine spec: each flag the engine's flag table knows sets its
field, the model and drafter files become repository files (found from the download URLs the chart carries),
and every other flag passes through in extra_args. What the spec cannot say is returned by name."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from olarespack.engines.base import Flag
from olarespack.engines.images import engine_of_image, family_of
from olarespack.engines.llamacpp import ENGINE as LLAMACPP
from olarespack.engines.vllm import ENGINE as VLLM

HF_URL = re.compile(r"https?://[^/\s\"']+/(?P<repo>[A-Za-z0-9._-]+/[A-Za-z0-9._-]+)/resolve/"
                    r"(?P<revision>[A-Za-z0-9._-]+)/(?P<path>[^\s\"'?#]+)")
SPECULATIVE_KEYS = ("method", "model", "num_speculative_tokens")
# table flags that take no value although the field they belong to is not a boolean
VALUELESS = frozenset({"--enable-auto-tool-choice"})


@dataclass(frozen=True)
class RemoteFile:
    repo: str
    revision: str
    path: str  # in the repository


@dataclass
class EngineImport:
    kind: str
    data: dict[str, Any]  # the engine block of the spec, loosely typed (validated by the caller)
    unexpressed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def engine_kind(argv: list[str], image: str) -> str | None:
    """Which engine a command line runs: its executable, else the image's family."""
    words = [w.rsplit("/", 1)[-1] for w in argv[:4]]
    if words and words[0] == "llama-server":
        return "llamacpp"
    if words and (words[0] == "vllm" or "vllm.entrypoints.openai.api_server" in argv[:4]):
        return "vllm"
    family = engine_of_image(image)
    return family.engine if family else None


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


def flag_spellings(flags: tuple[Flag, ...]) -> dict[str, Flag]:
    return {spelling: flag for flag in flags for spelling in flag.spellings() if spelling}


def _takes_value(flag: Flag | None, token: str, following: str | None, model: Any) -> bool:
    if flag is not None:
        if flag.style == "switch" or token.startswith("--no-") or token in VALUELESS:
            return False
        if flag.style == "given" and _is_bool_field(model, flag.owner):
            return False
    # a flag followed by another flag has no value (`-fa --jinja` is not -fa set to --jinja)
    return following is not None and (not following.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", following)
                                      is not None)


def _is_bool_field(model: Any, owner: str) -> bool:
    parts = owner.split(".")[1:]
    current = model
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


def parse_options(argv: list[str], flags: dict[str, Flag], model: Any) -> list[tuple[str, str | None, Flag | None]]:
    """(spelling, value, table row) for each option; `--flag=value` split; positionals as ("", value)."""
    out: list[tuple[str, str | None, Flag | None]] = []
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


def _set(data: dict[str, Any], owner: str, value: Any) -> None:
    parts = owner.split(".")[1:]
    for part in parts[:-1]:
        data = data.setdefault(part, {})
    data[parts[-1]] = value


def _switch_value(spelling: str, flag: Flag, value: str | None) -> Any:
    if flag.style == "switch":
        return not spelling.startswith("--no-")
    return True if value is None else value


def _extra(spelling: str, value: str | None) -> list[str]:
    """An option the table does not know, as the command line had it: a positional ("" spelling) alone."""
    return [item for item in (spelling or None, value) if item is not None]


def _unset_defaults(result: EngineImport, options: list[tuple[str, str | None, Flag | None]],
                    engine: Any) -> None:
    """What the chart leaves to the server's own default stays unwritten: a table field whose default the
    spec's chart would write (vLLM's --kv-cache-dtype auto, llama.cpp's -ngl 99) is set to null (not set);
    a field the spec must give is named."""
    seen = {flag.owner for _, _, flag in options if flag is not None}
    for flag in engine.flags:
        parts = flag.owner.split(".")[1:]
        if flag.owner == "chart" or flag.owner in seen or len(parts) != 1 or parts[0] in result.data:
            continue
        info = engine.model.model_fields.get(parts[0])
        if info is None:
            continue
        if info.is_required():
            result.unexpressed.append(f"{flag.flag or 'the model'}: the chart leaves it to the server's default; "
                                      f"the spec must give engine.{parts[0]}")
            continue
        default = info.get_default(call_default_factory=True)
        if default is None or default is False or (flag.style == "given" and default == ""):
            continue  # nothing written for it
        if type(None) in get_args(info.annotation):
            result.data[parts[0]] = None
        else:
            result.unexpressed.append(f"{flag.flag}: the chart does not write it; the spec's chart always writes "
                                      f"{flag.flag} {default}")


def _chart_option(result: EngineImport, spelling: str, value: str | None, default_port: int) -> None:
    """--host and --port, which the spec's chart sets: another port is kept (clients call it), another host
    is named."""
    if spelling == "--host" and value != "0.0.0.0":
        result.unexpressed.append(f"--host {value}: the chart listens on 0.0.0.0")
    elif spelling == "--port" and value and value != str(default_port):
        result.data["port"] = value


def import_llamacpp(argv: list[str], image: str, files: Mapping[str, RemoteFile],
                    texts: Mapping[str, str] | None = None) -> EngineImport:
    """`texts`: file name -> content of the files the chart writes into the pod itself (a chat template)."""
    result = EngineImport("llamacpp", {"kind": "llamacpp", "image": image})
    data = result.data
    family = family_of("llamacpp", image)
    default_command = list(family.command) if family else list(LLAMACPP.command)
    if argv[:1] != default_command:
        data["command"] = argv[:1]
    flags = flag_spellings(LLAMACPP.flags)
    folders: dict[str, str] = {}
    model: dict[str, Any] = {}
    saved_as: dict[str, str] = {}

    def file_of(role: str, path: str) -> RemoteFile | None:
        folders[role] = posixpath.dirname(path) or "."
        local = posixpath.basename(path)
        remote = files.get(local)
        if remote is None:
            result.unexpressed.append(f"{role} {path}: no download URL for it in the chart, so the repository it "
                                      "comes from is unknown")
            return None
        if "/" in remote.path:
            result.unexpressed.append(f"{role} {path}: {remote.path} sits in a folder of {remote.repo}; the spec "
                                      "names files at a repository's top")
        if posixpath.basename(remote.path) != local:
            saved_as[posixpath.basename(remote.path)] = local
        return remote

    extra: list[str] = []
    options = parse_options(argv[1:], flags, LLAMACPP.model)
    _unset_defaults(result, options, LLAMACPP)
    for spelling, value, flag in options:
        if spelling in LLAMACPP.drafter_flags:
            remote = file_of("drafter", value or "")
            speculative = data.setdefault("speculative", {})
            if remote:
                speculative["drafter"] = {"repo": remote.repo, "file": posixpath.basename(remote.path),
                                          "revision": remote.revision}
            if family and spelling not in ("--model-draft", "-md"):
                names = [n for n, t in family.spec_types.items() if t.drafter_flag == spelling]
                if names:
                    speculative.setdefault("type", names[0])
            continue
        if flag is None:
            extra += _extra(spelling, value)
            continue
        if flag.owner == "chart":
            _chart_option(result, spelling, value, LLAMACPP.port)
            continue
        if flag.owner == "engine.model":
            remote = file_of("model", value or "")
            if remote:
                model.update(repo=remote.repo, file=posixpath.basename(remote.path), revision=remote.revision)
            continue
        if flag.owner == "engine.chat_template":
            text = (texts or {}).get(posixpath.basename(value or ""))
            if text is None:
                result.unexpressed.append(f"{spelling} {value}: the chart writes it into the pod from nothing "
                                          "olarespack can read (not a chart file, not a base64 value)")
                extra += _extra(spelling, value)
            else:
                data["chat_template"] = {"path": value, "text": text}
            continue
        if flag.owner == "engine.model.mmproj":
            remote = file_of("projector", value or "")
            if remote:
                model["mmproj"] = posixpath.basename(remote.path)
                if model.get("repo") not in (None, remote.repo):
                    model["mmproj_repo"] = remote.repo
                    if remote.revision != "main":
                        result.unexpressed.append(f"projector {value}: revision {remote.revision} of another "
                                                  "repository (the spec takes its main)")
            continue
        _set(data, flag.owner, _switch_value(spelling, flag, value))
    speculative = data.get("speculative")
    if speculative and "type" in speculative and speculative.get("drafter") and "model" in folders \
            and folders.get("drafter") != folders["model"]:
        result.unexpressed.append(f"drafter in {folders['drafter']}, model in {folders['model']}: the spec keeps "
                                  "them in one folder")
    if {folders.get("model"), folders.get("projector", folders.get("model"))} != {folders.get("model")}:
        result.unexpressed.append("the projector and the model sit in different folders")
    if "model" in folders:
        model["folder"] = folders["model"]
    if saved_as:
        model["saved_as"] = saved_as
    if model.get("revision") == "main":
        model.pop("revision")
    data["model"] = model
    if extra:
        data["extra_args"] = extra
    return result


def import_vllm(argv: list[str], image: str) -> EngineImport:
    result = EngineImport("vllm", {"kind": "vllm", "image": image})
    data = result.data
    if argv[:2] == ["vllm", "serve"]:
        rest = argv[2:]
    elif "vllm.entrypoints.openai.api_server" in argv[:3]:
        data["command"] = argv[: argv.index("vllm.entrypoints.openai.api_server") + 1]
        rest = argv[len(data["command"]):]
    else:
        data["command"] = argv[:1]
        rest = argv[1:]
    flags = flag_spellings(VLLM.flags)
    flags[""] = next(f for f in VLLM.flags if f.style == "positional")
    extra: list[str] = []
    auto_tool_choice = False
    options = parse_options(rest, flags, VLLM.model)
    _unset_defaults(result, options, VLLM)
    for spelling, value, flag in options:
        if flag is None:
            extra += _extra(spelling, value)
            continue
        if flag.owner == "chart":
            _chart_option(result, spelling, value, VLLM.port)
            continue
        if spelling == "--enable-auto-tool-choice":
            auto_tool_choice = True
            continue
        if flag.owner == "engine.speculative":
            data["speculative"] = _json_object(result, spelling, value, SPECULATIVE_KEYS)
            continue
        if flag.owner == "engine.limit_mm_per_prompt":
            data["limit_mm_per_prompt"] = _json_object(result, spelling, value, None)
            continue
        _set(data, flag.owner, _switch_value(spelling, flag, value))
    if auto_tool_choice and "tool_call_parser" not in data:
        extra.append("--enable-auto-tool-choice")
    if not auto_tool_choice and "tool_call_parser" in data:
        result.unexpressed.append("--tool-call-parser without --enable-auto-tool-choice: the spec turns both on")
    if extra:
        data["extra_args"] = extra
    return result


def _json_object(result: EngineImport, spelling: str, value: str | None,
                 keys: tuple[str, ...] | None) -> dict[str, Any]:
    try:
        parsed = json.loads(value or "")
    except json.JSONDecodeError:
        result.unexpressed.append(f"{spelling} {value!r}: not JSON")
        return {}
    if not isinstance(parsed, dict):
        result.unexpressed.append(f"{spelling} {value!r}: not a JSON object")
        return {}
    if keys is not None:
        for key in sorted(set(parsed) - set(keys)):
            result.unexpressed.append(f"{spelling}: key {key!r} (the spec's speculative block has "
                                      f"{', '.join(keys)})")
        return {k: parsed[k] for k in keys if k in parsed}
    return parsed
