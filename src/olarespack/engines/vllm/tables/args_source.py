"""vLLM's command line as declared in its sources: EngineArgs fields and their flags, the OpenAI frontend's
flags, and the flags whose help or warning says they are deprecated (with the release that removes them).

`EngineArgs.add_cli_args` calls `group.add_argument("--flag", ["--alias", ...], [dest=...], **kwargs)` where the
kwargs come from `get_kwargs(SomeConfig)["field"]`; argparse names the destination after the first long flag
(`--max-model-len` -> `max_model_len`) unless `dest=` says otherwise. The frontend registers one
`--field-name` per field of its `FrontendArgs` dataclass (plus `flags` extras) and a few flags by hand.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from olarespack.engines.vllm.tables.pysource import (
    Field,
    SourceError,
    SourceTree,
    assignments,
    class_fields,
    find_class,
    module_strings,
    string_value,
)

ARG_UTILS = "vllm/engine/arg_utils.py"
FRONTEND_CANDIDATES = (
    "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py",
    "vllm/entrypoints/openai/cli_args.py",
)
# "is deprecated", "Deprecated:", "deprecated and will be removed" -- but not "allow deprecated quantization"
DEPRECATED = re.compile(
    r"\b(?:is|are|been|now)\s+deprecated\b|^\W*deprecated\b|\bdeprecated(?:\s*[:.;,]|\s+and\b|\s+since\b|\s+in\b)",
    re.IGNORECASE | re.MULTILINE,
)
REMOVED_IN = re.compile(r"removed\s+(?:in|by|from|with)\s+(?:vllm\s+)?v?(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*[a-z0-9]")


@dataclass
class Argument:
    dest: str
    flags: list[str]
    negatable: bool
    texts: list[str] = field(default_factory=list)


def _dest(flags: list[str], explicit: str | None) -> str:
    if explicit:
        return explicit
    long = next((f for f in flags if f.startswith("--")), flags[0])
    return long.lstrip("-").replace("-", "_")


def _is_bool(annotation: str) -> bool:
    names = set(re.findall(r"[A-Za-z_]+", annotation))
    # `bool | str | None` fields take an optional value instead of `--no-` (vLLM's get_kwargs)
    return "bool" in names and "str" not in names and "Literal" not in names


class ConfigIndex:
    """Config dataclasses by class name, looked up in vllm/config first, then anywhere in the tree."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self._cache: dict[str, dict[str, Field]] = {}

    def fields(self, name: str) -> dict[str, Field]:
        if name not in self._cache:
            self._cache[name] = self._load(name)
        return self._cache[name]

    def _load(self, name: str) -> dict[str, Field]:
        needle = f"class {name}("
        paths = self.tree.glob("vllm/config/*.py") + self.tree.glob("vllm/*.py") + self.tree.glob("vllm/**.py")
        for path in dict.fromkeys(paths):
            if needle in self.tree.text(path) or f"class {name}:" in self.tree.text(path):
                cls = find_class(self.tree.module(path), name)
                if cls is not None:
                    found: dict[str, Field] = {}
                    for base in cls.bases:
                        if isinstance(base, ast.Name) and base.id != name:
                            found.update(self.fields(base.id))
                    found.update({f.name: f for f in class_fields(cls)})
                    return found
        return {}


def _calls(func: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            yield node


class _ArgumentReader:
    """Reads `add_argument` calls of one function, knowing which config each `*_kwargs` name came from."""

    def __init__(self, tree: SourceTree, path: str, configs: ConfigIndex) -> None:
        self.names = assignments(tree.module(path))
        self.configs = configs
        self.kwargs_of: dict[str, str] = {}  # local name -> config class
        self.field_of: dict[str, tuple[str, str]] = {}  # local name -> (config class, field)

    def _field_ref(self, node: ast.expr) -> tuple[str, str] | None:
        if isinstance(node, ast.Name):
            return self.field_of.get(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            inner = node.value
            if isinstance(inner, ast.Name) and inner.id in self.kwargs_of and isinstance(key, str):
                return self.kwargs_of[inner.id], key
            if isinstance(inner, ast.Call) and isinstance(key, str):
                cls = self._get_kwargs_class(inner)
                return (cls, key) if cls else None
        return None

    @staticmethod
    def _get_kwargs_class(call: ast.Call) -> str | None:
        if getattr(call.func, "id", getattr(call.func, "attr", "")) == "get_kwargs" and call.args:
            arg = call.args[0]
            return arg.id if isinstance(arg, ast.Name) else None
        return None

    def learn(self, func: ast.AST) -> None:
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
                if isinstance(value, ast.Call) and (cls := self._get_kwargs_class(value)):
                    self.kwargs_of[target] = cls
                elif (ref := self._field_ref(value)) is not None:
                    self.field_of[target] = ref

    def read(self, call: ast.Call) -> Argument | None:
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not flags or not flags[0].startswith("-"):
            return None  # positional (model_tag)
        explicit = {k.arg: k.value for k in call.keywords if k.arg}
        texts = [t for t in [string_value(explicit.get("help"), self.names)] if t]
        annotation = ""
        for spread in (k.value for k in call.keywords if k.arg is None):
            parts = spread.keys if isinstance(spread, ast.Dict) else [None]
            values = spread.values if isinstance(spread, ast.Dict) else [spread]
            for key, value in zip(parts, values, strict=True):
                if key is None and (ref := self._field_ref(value)):
                    doc = self.configs.fields(ref[0]).get(ref[1])
                    if doc is not None:
                        texts.append(doc.doc)
                        annotation = doc.annotation
                elif string_value(key) == "help" and (text := string_value(value, self.names)):
                    texts.insert(0, text)
        action = ast.unparse(explicit["action"]) if "action" in explicit else ""
        negatable = "BooleanOptional" in action or (not action and _is_bool(annotation))
        dest = string_value(explicit.get("dest"))
        return Argument(_dest(flags, dest), flags, negatable, texts)


def _method(tree: SourceTree, path: str, cls: str, name: str) -> ast.FunctionDef | None:
    node = find_class(tree.module(path), cls)
    if node is None:
        return None
    return next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _read_function(tree: SourceTree, path: str, func: ast.AST, configs: ConfigIndex) -> list[Argument]:
    reader = _ArgumentReader(tree, path, configs)
    reader.learn(func)
    return [a for a in (reader.read(c) for c in _calls(func)) if a is not None]


def engine_args(tree: SourceTree, configs: ConfigIndex) -> tuple[list[Field], list[Argument]]:
    """EngineArgs' fields, and every argument `AsyncEngineArgs.add_cli_args` (what `vllm serve` uses) adds."""
    cls = find_class(tree.module(ARG_UTILS), "EngineArgs")
    if cls is None:
        raise SourceError(f"{ARG_UTILS}: no class EngineArgs")
    arguments: list[Argument] = []
    for owner in ("EngineArgs", "AsyncEngineArgs"):
        func = _method(tree, ARG_UTILS, owner, "add_cli_args")
        if func is None:
            raise SourceError(f"{ARG_UTILS}: no {owner}.add_cli_args")
        arguments += _read_function(tree, ARG_UTILS, func, configs)
    return class_fields(cls), arguments


def _fields_with_bases(module: ast.Module, name: str) -> dict[str, Field]:
    cls = find_class(module, name)
    if cls is None:
        return {}
    found: dict[str, Field] = {}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id != name:
            found.update(_fields_with_bases(module, base.id))
    return found | {f.name: f for f in class_fields(cls)}


def frontend_path(tree: SourceTree) -> str:
    return tree.first(*FRONTEND_CANDIDATES, containing="class FrontendArgs")


def frontend_args(tree: SourceTree, configs: ConfigIndex) -> list[Argument]:
    """`vllm serve`'s own flags: one per FrontendArgs field (and its bases), plus make_arg_parser's."""
    path = frontend_path(tree)
    module = tree.module(path)
    extras: dict[str, list[str]] = {}
    for node in ast.walk(module):
        # frontend_kwargs["field"]["flags"] = ["-x"]: extra spellings placed before --field-name
        if not (isinstance(node, ast.Assign) and isinstance(target := node.targets[0], ast.Subscript)):
            continue
        if string_value(target.slice) == "flags" and isinstance(target.value, ast.Subscript):
            name = string_value(target.value.slice)
            if name and isinstance(node.value, ast.List | ast.Tuple):
                extras[name] = [v for v in (string_value(e) for e in node.value.elts) if v]
    fields = _fields_with_bases(module, "FrontendArgs")
    if not fields:
        raise SourceError(f"{path}: FrontendArgs has no fields")
    arguments = [
        Argument(f.name, [*extras.get(f.name, []), f"--{f.name.replace('_', '-')}"], _is_bool(f.annotation), [f.doc])
        for f in fields.values()
    ]
    make = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser"), None)
    if make is None:
        raise SourceError(f"{path}: no make_arg_parser")
    return arguments + _read_function(tree, path, make, configs)


def deprecations(tree: SourceTree, arguments: list[Argument]) -> dict[str, dict[str, str | None]]:
    """Flags whose help, field docstring, or a warning in the argument/config sources says "deprecated";
    `removed_in` is the release the text names, or null when it names none."""
    known = {flag for a in arguments for flag in a.flags}
    found: dict[str, dict[str, str | None]] = {}

    def note(flag: str, text: str) -> None:
        removal = REMOVED_IN.search(text)
        entry = found.setdefault(flag, {"removed_in": None, "text": " ".join(text.split())[:240]})
        if removal and entry["removed_in"] is None:
            entry.update(removed_in=removal.group(1), text=" ".join(text.split())[:240])

    for argument in arguments:
        for text in argument.texts:
            if DEPRECATED.search(text):
                for flag in argument.flags:
                    note(flag, text)
    paths = [ARG_UTILS, frontend_path(tree), *tree.glob("vllm/config/*.py")]
    for path in dict.fromkeys(paths):
        for text in module_strings(tree, path):
            mark = DEPRECATED.search(text)
            if mark:
                # only flags named before the word: "--a is deprecated; use --b" deprecates --a alone
                for flag in FLAG.findall(text[: mark.start()]):
                    if flag in known:
                        note(flag, text)
    return found
