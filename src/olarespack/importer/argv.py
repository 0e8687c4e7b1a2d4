"""The command line a container finally runs, read from a rendered Deployment: Kubernetes' $(VAR) expansion
from the container's env and ConfigMaps, then, for a shell wrapper (`sh -c`, `bash -c`), the script's own
variables (`NAME=${NAME:-default}`) and its `exec` line. Nothing is run: the script is read, bounded, and
what cannot be known without running it is reported, never guessed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from olarespack.engines.images import engine_of_image
from olarespack.importer.shell_words import shell_words

SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
LAUNCHERS = frozenset(
    {
        "nice",
        "ionice",
        "chrt",
        "numactl",
        "taskset",
        "stdbuf",
        "timeout",
        "nohup",
        "tini",
        "dumb-init",
        "gosu",
        "su-exec",
        "setpriv",
        "catatonit",
    }
)
MAX_SCRIPT_BYTES = 256 * 1024
_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class ContainerEnv:
    """A container's environment as Kubernetes builds it: envFrom first, then env (env wins)."""

    values: dict[str, str] = field(default_factory=dict)
    secret: set[str] = field(default_factory=set)  # names whose value comes from a Secret or the pod itself
    origin: dict[str, str] = field(default_factory=dict)  # name -> "env" or "configmap:<name>"


def mappings(value: Any) -> list[dict[str, Any]]:
    """The mappings of a list field (Kubernetes' schemas allow null entries; they carry nothing)."""
    return [item for item in value or [] if isinstance(item, dict)] if isinstance(value, list) else []


def container_env(container: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> ContainerEnv:
    env = ContainerEnv()
    for source in mappings(container.get("envFrom")):
        ref = source.get("configMapRef") or {}
        data = configmaps.get(str(ref.get("name")), {})
        prefix = str(source.get("prefix") or "")
        for key, value in data.items():
            env.values[prefix + key] = str(value)
            env.origin[prefix + key] = f"configmap:{ref.get('name')}"
        if source.get("secretRef"):
            env.secret.add(f"secret:{source['secretRef'].get('name')}")
    for entry in mappings(container.get("env")):
        name = str(entry.get("name"))
        if "value" in entry:
            env.values[name] = _expand_k8s(str(entry.get("value") or ""), env.values)
            env.origin[name] = "env"
            continue
        ref = (entry.get("valueFrom") or {}).get("configMapKeyRef") or {}
        if ref and str(ref.get("key")) in configmaps.get(str(ref.get("name")), {}):
            env.values[name] = configmaps[str(ref.get("name"))][str(ref.get("key"))]
            env.origin[name] = f"configmap:{ref.get('name')}"
        else:
            env.secret.add(name)
            env.values.pop(name, None)
    return env


def _expand_k8s(text: str, values: Mapping[str, str], unset: set[str] | None = None) -> str:
    """Kubernetes' expansion of args and env values: $(NAME) from the env defined so far, $$ is $, and an
    undefined $(NAME) stays as written (its name added to `unset`)."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(1) not in values and unset is not None:
            unset.add(match.group(1))
        return values.get(match.group(1), match.group(0))

    return _K8S_VAR.sub(one, text)


@dataclass
class Resolved:
    argv: list[str]
    via: str  # "args" (command and args) or "shell" (the exec line of a shell wrapper)
    unresolved: list[str] = field(default_factory=list)  # what could not be known without running the script
    script_vars: dict[str, str] = field(default_factory=dict)  # the wrapper's own variables, as read
    env_prefix: dict[str, str] = field(default_factory=dict)  # `env NAME=VALUE server ...`: env of the server


def mounted_files(
    container: Mapping[str, Any], volumes: Mapping[str, Mapping[str, Any]], configmaps: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """Path in the container -> text, for the files ConfigMap volumes put there (a wrapper script)."""
    files: dict[str, str] = {}
    for mount in mappings(container.get("volumeMounts")):
        source = (volumes.get(str(mount.get("name"))) or {}).get("configMap") or {}
        data = configmaps.get(str(source.get("name")), {})
        if not data:
            continue
        at = str(mount.get("mountPath")).rstrip("/")
        if mount.get("subPath"):
            if str(mount["subPath"]) in data:
                files[at] = data[str(mount["subPath"])]
            continue
        items = {str(i.get("key")): str(i.get("path")) for i in mappings(source.get("items"))}
        for key, text in data.items():
            if not items or key in items:
                files[f"{at}/{items.get(key, key)}"] = text
    return files


def resolve(container: Mapping[str, Any], env: ContainerEnv, files: Mapping[str, str] | None = None) -> Resolved:
    return _unwrapped(_resolve(container, env, files))


def _resolve(container: Mapping[str, Any], env: ContainerEnv, files: Mapping[str, str] | None) -> Resolved:
    unset: set[str] = set()
    command = [_expand_k8s(str(x), env.values, unset) for x in container.get("command") or []]
    items = [*command, *(_expand_k8s(str(x), env.values, unset) for x in container.get("args") or [])]
    # a $(NAME) of a Secret or the pod's own fields is filled in the pod only: its value cannot be carried
    from_secrets = any(name.startswith("secret:") for name in env.secret)  # envFrom a Secret: any name
    hidden = [
        f"$({name}) (from a Secret or the pod's own fields: known only in the pod)"
        for name in sorted(unset if from_secrets else unset & env.secret)
    ]
    if hidden:
        return Resolved([], "args", hidden)
    if not command:
        # no command: the image's entrypoint runs, and every item of args is an argument of it
        image = str(container.get("image") or "")
        family = engine_of_image(image)
        if family is None or family.entrypoint is None or not items:
            what = "args but no command" if items else "neither command nor args"
            return Resolved(
                [],
                "args",
                [
                    f"the container gives {what}, so what its image {image} runs is "
                    "decided by the image, which olarespack does not know: give the "
                    "container its command"
                ],
            )
        items = [*family.entrypoint, *items]
    script, unreadable = script_of(items, files)
    if unreadable:
        return Resolved([], "shell", [unreadable])
    return Resolved(items, "args") if script is None else _from_script(script, env)


def script_of(items: list[str], files: Mapping[str, str] | None) -> tuple[str | None, str | None]:
    """The shell script a container's command runs (its -c text, or a script file the chart mounts), or
    None when it runs no shell; the second item names a script the chart does not carry."""
    if not items or items[0].rsplit("/", 1)[-1] not in SHELLS:
        return None, None
    # the script follows -c, alone or in a cluster of short options (-ec), never a long one (--norc)
    flags = [i for i, item in enumerate(items[1:], 1) if re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", item)]
    if flags and flags[0] + 1 < len(items):
        return items[flags[0] + 1], None
    scripts = [item for item in items[1:] if not item.startswith("-")]
    if not scripts:
        return None, None
    text = (files or {}).get(scripts[0])
    if text is None:
        return None, f"the wrapper script {scripts[0]} is not in the chart (an image file olarespack cannot read)"
    return text, None


def _unwrapped(resolved: Resolved) -> Resolved:
    """`env NAME=VALUE server ...` runs the server with that env: the spec says so with engine.env. Other
    launchers (nice, numactl, taskset, ...) change how it runs, which the spec cannot say: named."""
    argv = resolved.argv
    if argv[:1] and argv[0].rsplit("/", 1)[-1] == "env":
        rest = argv[1:]
        while rest and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0], re.S):
            name, value = rest[0].split("=", 1)
            resolved.env_prefix[name] = value
            rest = rest[1:]
        if rest[:1] and rest[0].startswith("-"):
            resolved.unresolved.append(f"env {rest[0]}: an option of env the spec cannot say")
        resolved.argv = rest
    elif argv[:1] and argv[0].rsplit("/", 1)[-1] in LAUNCHERS:
        resolved.unresolved.append(f"the server is started through {argv[0]}, which the spec's chart does not do")
    return resolved


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
        # blocks: if/for/while/case, { groups }, and function bodies run only sometimes, or never
        opens = (
            first in ("if", "for", "while", "until", "case", "{", "function")
            or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*\(\)", line) is not None
            or line.endswith("{")
        )
        closes = first in ("fi", "done", "esac", "}") or re.search(r"(;|^)\s*(fi|done|esac|\})\s*$", line) is not None
        plain = _ASSIGNMENT.match(line)
        plain_name = (
            plain.group(1)
            if plain
            and not (depth or opens)
            and "$(" not in line
            and "`" not in line
            and not re.search(r"\s", _unquoted_tail(plain.group(2)))
            else None
        )
        # any other way a line sets a variable (after && or ||, in a block, read, printf -v, declare, a
        # command substitution) is known only by running the script
        assigned = set(
            re.findall(
                r"(?:^|[\s;&|{(])(?:export\s+|local\s+|declare\s+(?:-\w+\s+)?|readonly\s+)?"
                r"([A-Za-z_][A-Za-z0-9_]*)\+?=",
                line,
            )
        )
        for names in re.findall(r"\b(?:read(?:\s+-\w+)*|printf\s+-v)\s+((?:[A-Za-z_]\w*\s*)+)", line):
            assigned |= set(names.split())
        if first == "eval" and re.search(
            r"[A-Za-z_][A-Za-z0-9_]*\+?=|\b(?:export|read|set|declare|source)\b|\.\s", line
        ):
            uncertain.add("*eval*")  # an eval that may set variables (an eval of curl sets none)
        uncertain |= assigned - ({plain_name} if plain_name else set())
        if opens:
            depth += 1
        if closes:
            depth = max(depth - 1, 0)
        if opens or closes or depth:
            continue
        if first == "exec":
            exec_line = line[len("exec") :].strip()
            continue
        if re.match(r"^(set\s+--|shift\b)", line):
            uncertain.add("@")
        if plain_name is not None and plain is not None:
            words, missing = shell_words(plain.group(2), values)
            value = " ".join(words)
            values[plain_name] = value
            script_vars[plain_name] = value
            # what made a value unknown stays with it, through every variable built from it
            refs = set(_REFERENCE.findall(plain.group(2)))
            parts = [*missing, *(part for ref in sorted(refs) for part in unknown_parts.get(ref, []))]
            if refs & uncertain:
                uncertain.add(plain_name)
            else:
                uncertain.discard(plain_name)  # a plain assignment at the top settles it again
            unknown_parts[plain_name] = list(dict.fromkeys(parts))[:8]
    if exec_line is None:
        return Resolved([], "shell", ["the wrapper script has no `exec` line starting the server"], script_vars)
    argv, missing = shell_words(exec_line, values)
    for name, parts in unknown_parts.items():
        if re.search(rf"\$\{{?{re.escape(name)}(?![A-Za-z0-9_])", exec_line):
            missing += parts
    if "*eval*" in uncertain:
        missing.append("eval (the script builds commands at run time)")
    for name in sorted(uncertain - {"@", "*eval*"}):
        if re.search(rf"\$\{{?{re.escape(name)}(?![A-Za-z0-9_])", exec_line):
            missing.append(f"${name} (set in a branch, a loop or by a command: known only by running the script)")
    missing = [m for m in missing if not any(m.startswith((f"${n} (not set", f"${{{n}}} (not set")) for n in uncertain)]
    if re.search(r"\$[@*]|\$\{[@*]", exec_line):
        missing.append("$@ (the script's own arguments)")
    return Resolved(argv, "shell", unresolved + missing, script_vars)


def _unquoted_tail(text: str) -> str:
    """The text with quoted parts removed: an assignment followed by a command is not a plain assignment."""
    return re.sub(r"\"[^\"]*\"|'[^']*'|\$\{[^}]*\}", "", text)
