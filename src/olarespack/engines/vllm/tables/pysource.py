"""Read facts out of a release's Python sources with `ast`, never importing or running them.

A `SourceTree` is the `.py` members of a wheel (a zip, or a mapping in tests); the helpers below resolve the
few shapes engines use to declare their surface: `Literal[...]` aliases (nested through other aliases),
dataclass fields with their attribute docstrings, and string constants (implicit concatenation, f-strings'
literal parts, module-level names).
"""

from __future__ import annotations

import ast
import fnmatch
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


class SourceError(Exception):
    """A fact's source file or declaration is missing or has a shape the reader does not know."""


class SourceTree:
    def __init__(self, files: Mapping[str, bytes]) -> None:
        self._files = dict(files)
        self._parsed: dict[str, ast.Module] = {}

    @classmethod
    def from_zip(cls, path: Path) -> SourceTree:
        with zipfile.ZipFile(path) as archive:
            return cls({n: archive.read(n) for n in archive.namelist() if n.endswith(".py")})

    def has(self, path: str) -> bool:
        return path in self._files

    def glob(self, pattern: str) -> list[str]:
        return sorted(n for n in self._files if fnmatch.fnmatchcase(n, pattern))

    def text(self, path: str) -> str:
        if path not in self._files:
            raise SourceError(f"{path}: not in the release's sources")
        return self._files[path].decode("utf-8", errors="replace")

    def module(self, path: str) -> ast.Module:
        if path not in self._parsed:
            try:
                self._parsed[path] = ast.parse(self.text(path), filename=path)
            except SyntaxError as exc:
                raise SourceError(f"{path}:{exc.lineno}: not parseable by this Python ({exc.msg})") from None
        return self._parsed[path]

    def first(self, *candidates: str, containing: str = "") -> str:
        """The first candidate path present (and, when given, whose text contains `containing`)."""
        for path in candidates:
            if self.has(path) and containing in self.text(path):
                return path
        raise SourceError(f"none of {', '.join(candidates)} {'defines ' + containing if containing else 'exists'}")


def top_level(module: ast.Module) -> Iterator[ast.stmt]:
    """Module statements, looking inside `if`/`try` blocks (TYPE_CHECKING guards, optional imports)."""
    for node in module.body:
        if isinstance(node, ast.If | ast.Try):
            yield from (n for n in ast.walk(node) if isinstance(n, ast.stmt) and not isinstance(n, ast.If | ast.Try))
        else:
            yield node


def assignments(module: ast.Module) -> dict[str, ast.expr]:
    """Module-level `NAME = value` and `NAME: T = value`, the last one winning as at run time."""
    found: dict[str, ast.expr] = {}
    for node in top_level(module):
        if isinstance(node, ast.Assign) and node.value is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def find_class(module: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in top_level(module) if isinstance(n, ast.ClassDef) and n.name == name), None)


def string_value(node: ast.AST | None, names: Mapping[str, ast.expr] | None = None) -> str | None:
    """The text of a string expression: a constant, `"a" + "b"`, an f-string's literal parts, or a name
    bound at module level to one of those."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = string_value(node.left, names), string_value(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Name) and names and node.id in names:
        return string_value(names[node.id], None)
    return None


def literal_values(node: ast.expr, names: Mapping[str, ast.expr], depth: int = 0) -> list[str]:
    """Every string of a `Literal[...]` alias, following names of other aliases and unions of them."""
    if depth > 20:
        raise SourceError("Literal aliases nest deeper than 20 levels")
    if isinstance(node, ast.Subscript):
        base = node.value
        base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if base_name not in {"Literal", "Union"}:
            return []
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [v for item in items for v in literal_values(item, names, depth + 1)]
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, ast.Name):
        return literal_values(names[node.id], names, depth + 1) if node.id in names else []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return literal_values(node.left, names, depth + 1) + literal_values(node.right, names, depth + 1)
    return []


def unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


@dataclass(frozen=True)
class Field:
    name: str
    annotation: str
    doc: str


def class_fields(cls: ast.ClassDef) -> list[Field]:
    """A dataclass's fields in order: annotated class attributes that are not `ClassVar`/`InitVar`, each with
    the docstring that follows it (how vLLM documents its config fields)."""
    fields: list[Field] = []
    body = cls.body
    for index, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        annotation = ast.unparse(node.annotation)
        if annotation.split("[")[0].split(".")[-1] in {"ClassVar", "InitVar"}:
            continue
        follower = body[index + 1] if index + 1 < len(body) else None
        doc = string_value(follower.value) if isinstance(follower, ast.Expr) else None
        fields.append(Field(node.target.id, annotation, doc or ""))
    return fields


def module_strings(tree: SourceTree, path: str) -> list[str]:
    """Every string literal of a module (f-strings by their literal parts), for text searches."""
    out: list[str] = []
    for node in ast.walk(tree.module(path)):
        if isinstance(node, ast.JoinedStr):
            out.append(string_value(node) or "")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out
