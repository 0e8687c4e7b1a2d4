"""The command line a container finally runs, read from a rendered Deployment: Kubernetes' $(VAR) expansion
from the container's env and ConfigMaps, then, for a shell wrapper (`sh -c`, `bash -c`), the script's own
variables (`NAME=${NAME:-default}`) and its `exec` line. Nothing is run: the script is read, bounded, and
what cannot be known without running it is reported, never guessed."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
MAX_SCRIPT_BYTES = 256 * 1024
MAX_EXPANSION = 64 * 1024  # a value grown past this by expansion is a trap, not a command line
_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class ContainerEnv:
    """A container's environment as Kubernetes builds it: envFrom first, then env (env wins)."""

    values: dict[str, str] = field(default_factory=dict)
    secret: set[str] = field(default_factory=set)  # names whose value comes from a Secret or the pod itself
    origin: dict[str, str] = field(default_factory=dict)  # name -> "env" or "configmap:<name>"


def container_env(container: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> ContainerEnv:
    env = ContainerEnv()
    for source in container.get("envFrom") or []:
        ref = (source or {}).get("configMapRef") or {}
        data = configmaps.get(str(ref.get("name")), {})
        prefix = str(source.get("prefix") or "")
        for key, value in data.items():
            env.values[prefix + key] = str(value)
            env.origin[prefix + key] = f"configmap:{ref.get('name')}"
        if source.get("secretRef"):
            env.secret.add(f"secret:{source['secretRef'].get('name')}")
    for entry in container.get("env") or []:
        name = str(entry.get("name"))
        if "value" in entry:
            env.values[name] = _expand_k8s(str(entry.get("value") or ""), env.values)
            env.origin[name] = "env"
            continue
        ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
        if ref and str(ref.get("key")) in configmaps.get(str(ref.get("name")), {}):
            env.values[name] = configmaps[str(ref.get("name"))][str(ref.get("key"))]
            env.origin[name] = f"configmap:{ref.get('name')}"
        else:
            env.secret.add(name)
            env.values.pop(name, None)
    return env


def _expand_k8s(text: str, values: Mapping[str, str]) -> str:
    """Kubernetes' expansion of args and env values: $(NAME) from the env defined so far, $$ is $, and an
    undefined $(NAME) stays as written."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return values.get(match.group(1), match.group(0))
    return _K8S_VAR.sub(one, text)


@dataclass
class Resolved:
    argv: list[str]
    via: str  # "args" (command and args) or "shell" (the exec line of a shell wrapper)
    unresolved: list[str] = field(default_factory=list)  # what could not be known without running the script
    script_vars: dict[str, str] = field(default_factory=dict)  # the wrapper's own variables, as read


def mounted_files(container: Mapping[str, Any], volumes: Mapping[str, Mapping[str, Any]],
                  configmaps: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Path in the container -> text, for the files ConfigMap volumes put there (a wrapper script)."""
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts") or []:
        source = (volumes.get(str(mount.get("name"))) or {}).get("configMap") or {}
        data = configmaps.get(str(source.get("name")), {})
        if not data:
            continue
        at = str(mount.get("mountPath")).rstrip("/")
        if mount.get("subPath"):
            if str(mount["subPath"]) in data:
                files[at] = data[str(mount["subPath"])]
            continue
        items = {str(i.get("key")): str(i.get("path")) for i in source.get("items") or []}
        for key, text in data.items():
            if not items or key in items:
                files[f"{at}/{items.get(key, key)}"] = text
    return files


def resolve(container: Mapping[str, Any], env: ContainerEnv, files: Mapping[str, str] | None = None) -> Resolved:
    items = [_expand_k8s(str(x), env.values) for x in [*(container.get("command") or []),
                                                         *(container.get("args") or [])]]
    if items and items[0].rsplit("/", 1)[-1] in SHELLS:
        flags = [i for i, item in enumerate(items[1:], 1) if item.startswith("-") and "c" in item[1:]]
        if flags and flags[0] + 1 < len(items):
            return _from_script(items[flags[0] + 1], env)
        scripts = [item for item in items[1:] if not item.startswith("-")]
        if scripts:
            text = (files or {}).get(scripts[0])
            if text is None:
                return Resolved([], "shell", [f"the wrapper script {scripts[0]} is not in the chart (an image "
                                              "file olarespack cannot read)"])
            return _from_script(text, env)
    return Resolved(items, "args")


def _logical_lines(script: str) -> list[str]:
    """The script's lines with backslash continuations joined."""
    return script.replace("\\\r\n", " ").replace("\\\n", " ").splitlines()


def _from_script(script: str, env: ContainerEnv) -> Resolved:
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        return Resolved([], "shell", [f"the wrapper script is over {MAX_SCRIPT_BYTES // 1024} KiB"])
    values = dict(env.values)
    depth = 0
    exec_line: str | None = None
    unresolved: list[str] = []
    script_vars: dict[str, str] = {}
    uncertain: set[str] = set()  # assigned inside a block or by a command: known only by running the script
    unknown_parts: dict[str, list[str]] = {}  # a variable -> what its value was built from and is not known
    for raw in _logical_lines(script):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        first = line.split(None, 1)[0]
        opens = first in ("if", "for", "while", "until", "case")
        closes = first in ("fi", "done", "esac") or re.search(r";\s*(fi|done|esac)\s*$", line) is not None
        for name in re.findall(r"(?:^|[\s;])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", line):
            if depth or opens or "$(" in line or "`" in line:
                uncertain.add(name)
        if opens:
            depth += 1
        if closes:
            depth = max(depth - 1, 0)
        if opens or closes or depth:
            continue
        if first == "exec":
            exec_line = line[len("exec"):].strip()
            continue
        if re.match(r"^(set\s+--|shift\b)", line):
            uncertain.add("@")
        match = _ASSIGNMENT.match(line)
        if match and depth == 0 and "$(" not in line and "`" not in line and \
                not re.search(r"\s", _unquoted_tail(match.group(2))):
            words, missing = _words(match.group(2), values)
            value = " ".join(words)
            values[match.group(1)] = value
            script_vars[match.group(1)] = value
            # what made a value unknown stays known while later lines reuse it (A=$A$A)
            unknown_parts[match.group(1)] = [*unknown_parts.get(match.group(1), []), *missing][:8]
    if exec_line is None:
        return Resolved([], "shell", ["the wrapper script has no `exec` line starting the server"], script_vars)
    argv, missing = _words(exec_line, values)
    for name, parts in unknown_parts.items():
        if re.search(rf"\$\{{?{re.escape(name)}(?![A-Za-z0-9_])", exec_line):
            missing += parts
    for name in sorted(uncertain - {"@"}):
        if re.search(rf"\$\{{?{re.escape(name)}(?![A-Za-z0-9_])", exec_line):
            missing.append(f"${name} (set in a branch, a loop or by a command: known only by running the script)")
    missing = [m for m in missing if not any(m.startswith((f"${n} (not set", f"${{{n}}} (not set"))
                                             for n in uncertain)]
    if re.search(r"\$[@*]|\$\{[@*]", exec_line):
        missing.append("$@ (the script's own arguments)")
    return Resolved(argv, "shell", unresolved + missing, script_vars)


def _unquoted_tail(text: str) -> str:
    """The text with quoted parts removed: an assignment followed by a command is not a plain assignment."""
    return re.sub(r"\"[^\"]*\"|'[^']*'|\$\{[^}]*\}", "", text)


def _words(text: str, values: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """A shell line's words after parameter expansion: $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}; in
    single quotes nothing expands. Unquoted expansions split on spaces, as the shell does."""
    missing: list[str] = []
    out: list[str] = []
    size = 0  # characters in out, kept as it grows: summing them each time would be quadratic
    i = 0
    quote: str | None = None
    too_long = [f"the line grows past {MAX_EXPANSION} characters when expanded"]
    while i < len(text):
        char = text[i]
        if quote != "'" and char == "$":
            value, used = _parameter(text, i, values, missing)
            if used:
                piece = (shlex.quote(value) if quote is None and " " not in value else
                         value if quote is None else value.replace('"', '\\"'))
                out.append(piece)
                size += len(piece)
                if size > MAX_EXPANSION:
                    return [], too_long
                i += used
                continue
        if char == "\\" and quote != "'" and i + 1 < len(text):
            out.append(text[i:i + 2])
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


def _parameter(text: str, i: int, values: Mapping[str, str], missing: list[str]) -> tuple[str, int]:
    """One $-expansion at text[i]: its value and how many characters it took (0: not an expansion)."""
    if text.startswith("${", i):
        end = text.find("}", i)
        if end < 0:
            return "", 0
        body = text[i + 2:end]
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)(.*))?", body, re.S)
        if not match:
            missing.append(f"${{{body}}} (a shell expansion olarespack does not evaluate)")
            return "", end + 1 - i
        name, op, default = match.groups()
        if op is not None:
            present = name in values and (op == "-" or values[name] != "")
            if present:
                return values[name], end + 1 - i
            words, more = _words(default or "", values)
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
