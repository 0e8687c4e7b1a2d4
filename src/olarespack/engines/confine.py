"""What a stranger's chart may do when `olarespack smoke` or the sweep boots it on this machine: what the pod runs,
minus what would reach outside the boot's own folder. Before the engine's own changes, every option of the chart's
command line and every env var is judged: an option the engine documents as loading code, reaching the network or
naming a credential is refused; an option that writes a file of its own gets a file in the boot's folder; an option
or env var that names a file or folder outside the boot's folder (and the user's --models folder) is refused; env
that loads code or changes the interpreter or the loader (core/boot_env.py) is refused. Each is a row of smoke's
changes table with its reason. After the engine's changes, the whole command line and env are checked again; a
value still outside is olarespack's own mistake and stops the boot."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from olarespack.core import boundedjson
from olarespack.core.boot_env import code_env, names_a_place, path_words
from olarespack.core.text import printable
from olarespack.engines.releases import is_option
from olarespack.engines.smoke import Change, SmokeError

REFUSED = "(refused: not passed)"
SHOWN_CHARS = 160
MAX_JSON_DEPTH = 32  # a JSON value of an engine flag nests 2 or 3 deep


@dataclass(frozen=True)
class FlagPolicy:
    """What an engine says of its options for a boot on this machine, each spelling listed."""

    source: str  # the engine's own documentation the lists come from
    refused: Mapping[str, str] = field(default_factory=dict)  # option -> why it never runs here
    files: frozenset[str] = frozenset()  # options whose value names a file or folder
    outputs: Mapping[str, str] = field(default_factory=dict)  # option -> the name its file gets in the boot folder
    no_value: frozenset[str] = frozenset()  # options that take no value (a word after one is a positional)
    env_options: Mapping[str, str] = field(default_factory=dict)  # env name -> the option it stands for
    normalize: Callable[[str], str] = field(default=lambda option: option)  # how the engine reads a spelling


@dataclass(frozen=True)
class Swapped:
    """What the engine's boot replaces anyway (model files, address): not judged before it does."""

    options: frozenset[str] = frozenset()  # the whole value
    env: frozenset[str] = frozenset()  # env names whose value it replaces
    json_keys: Mapping[str, frozenset[str]] = field(default_factory=dict)  # option -> keys of its JSON value


@dataclass
class Confined:
    argv: list[str]
    env: dict[str, str]
    changes: list[Change] = field(default_factory=list)


class _Folder:
    """The folders a boot may touch: its own, and the user's model folder."""

    def __init__(self, roots: Iterable[Path], cwd: Path) -> None:
        self.cwd = Path(os.path.realpath(cwd))
        self.roots = [Path(os.path.realpath(root)) for root in roots]

    def path(self, word: str) -> Path:
        text = word.strip().strip("'\"")
        if text.lower().startswith("file:"):
            text = "/" + text[5:].lstrip("/")
        path = Path(os.path.expanduser(text))
        return Path(os.path.realpath(path if path.is_absolute() else self.cwd / path))

    def inside(self, word: str) -> bool:
        real = self.path(word)
        return any(real == root or real.is_relative_to(root) for root in self.roots)

    def outside(self, value: str, every_word: bool, skip_keys: frozenset[str] = frozenset()) -> str | None:
        """The first word of `value` that names a place outside (every word when the value is a path by its
        option or name, else the words that read as paths, in JSON strings too); None when all are inside."""
        if every_word:
            words = [value, *(part for part in value.split(os.pathsep) if part and part != value)]
        else:
            strings = _json_strings(value, skip_keys)
            words = path_words(value) if strings is None else strings
        return next((word for word in words if word.strip() and not self.inside(word)), None)


def _json_strings(value: str, skip_keys: frozenset[str]) -> list[str] | None:
    """The strings of a JSON value (keys included, `skip_keys`' values left out) and their path words; None when
    the value is no JSON object or array. JsonLimitError: nested or numbered past the bounds."""
    if not value.lstrip().startswith(("{", "[")):
        return None
    try:
        data = boundedjson.loads(value, max_depth=MAX_JSON_DEPTH)
    except boundedjson.JsonLimitError:
        raise  # JSON past what a chart writes: refused by the caller, never walked (or parsed by the engine's boot)
    except ValueError:
        return None
    found: list[str] = []
    stack: list[object] = [data]
    while stack and len(found) < 10_000:  # bounded: a spec's value is at most a few KiB anyway
        item = stack.pop()
        if isinstance(item, dict):
            stack += [v for k, v in item.items() if k not in skip_keys]
            stack += [k for k in item if isinstance(k, str)]
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            found += [item, *path_words(item)]
    return found


def _shown(value: str) -> str:
    value = printable(value)
    return value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + f"... ({len(value)} characters)"


def _groups(items: list[str], policy: FlagPolicy) -> list[list[str]]:
    """Each option with the words after it (its value, and any positional it is followed by)."""
    groups: list[list[str]] = []
    for item in items:
        last = groups[-1] if groups else None
        valueless = last is not None and policy.normalize(last[0].split("=", 1)[0]) in policy.no_value
        if is_option(item) or last is None or not is_option(last[0]) or valueless:
            groups.append([item])
        else:
            last.append(item)
    return groups


def _judge(
    option: str,
    values: list[str],
    policy: FlagPolicy,
    swapped: Swapped,
    folder: _Folder,
    item: str,
    place: bool = False,
) -> tuple[list[str] | None, Change | None]:
    """The option's values as they boot (None: refused), and the change that says so (`option` "": a positional
    word or an env value; `place`: its name says it is a path)."""
    shown = _shown(" ".join(values))
    if option in policy.refused:
        return None, Change(item, shown, REFUSED, f"{policy.refused[option]} ({policy.source})")
    if option in swapped.options:
        return values, None
    if option in policy.outputs:
        local = str(folder.cwd / policy.outputs[option])
        return [local] * max(1, len(values)), Change(
            item, shown, local, f"the file it writes goes into the boot's folder ({policy.source})"
        )
    for value in values:
        try:
            away = folder.outside(value, place or option in policy.files, swapped.json_keys.get(option, frozenset()))
        except boundedjson.JsonLimitError as exc:
            return None, Change(item, shown, REFUSED, f"its JSON value is past what a chart writes ({exc})")
        if away is not None:
            return None, Change(
                item,
                shown,
                REFUSED,
                f"names {_shown(away)}, outside the boot's folder: a chart "
                "booted here reads and writes only its own folder and the --models folder",
            )
    return values, None


def confine(
    argv: list[str],
    env: Mapping[str, str],
    policy: FlagPolicy,
    swapped: Swapped,
    roots: Iterable[Path],
    cwd: Path,
    head: int,
) -> Confined:
    """The chart's command line (its first `head` words are the engine's own, replaced by its boot) and env, less
    what would reach outside the boot's folder, each refusal or replacement a change."""
    folder = _Folder(roots, cwd)
    out = Confined(list(argv[:head]), {})
    for group in _groups(argv[head:], policy):
        first = group[0]
        if not is_option(first):
            kept, change = _judge("", [first], policy, swapped, folder, _shown(first))
            out.argv += kept or []
            out.changes += [change] if change else []
            continue
        name, equals, inline = first.partition("=")
        values = ([inline] if equals else []) + group[1:]
        kept, change = _judge(policy.normalize(name), values, policy, swapped, folder, _shown(name))
        if change is not None:
            out.changes.append(change)
        if kept is not None:
            out.argv += [f"{name}={kept[0]}", *kept[1:]] if equals else [name, *kept]
    for name, value in env.items():
        rule = code_env(name)
        item = f"env {_shown(name)}"
        if name in swapped.env and rule is None:
            out.env[name] = value
        elif rule is not None:
            out.changes.append(Change(item, _shown(value), REFUSED, f"{rule.why} ({rule.source})"))
        else:  # as the option it stands for (llama.cpp's LLAMA_ARG_*), else as a value that may name a place
            option = policy.env_options.get(name)
            kept, change = _judge(
                policy.normalize(option or ""),
                [value],
                policy,
                Swapped(),
                folder,
                f"{item} ({option})" if option else item,
                place=names_a_place(name),
            )
            out.changes += [change] if change else []
            if kept is not None:
                out.env[name] = kept[0]
    return out


def verify(argv: list[str], env: Mapping[str, str], roots: Iterable[Path], cwd: Path, head: int) -> None:
    """What boots names nothing outside the boot's folder (the engine's changes included). SmokeError: it does
    (olarespack's own mistake: confine refused all of it before)."""
    folder = _Folder(roots, cwd)
    checked = [(word, word.partition("=")[2] if is_option(word) else word, False) for word in argv[head:]]
    checked += [(f"env {name}", value, names_a_place(name)) for name, value in env.items()]
    for item, value, place in checked:
        try:
            away = folder.outside(value, place)
        except boundedjson.JsonLimitError as exc:
            away = str(exc)
        if away is not None or (item.startswith("env ") and code_env(item[4:]) is not None):
            raise SmokeError(
                f"the boot's {_shown(item)} would reach outside its folder {folder.cwd} "
                f"({_shown(away or 'code')}): not started (olarespack's own mistake: please report it)"
            )
