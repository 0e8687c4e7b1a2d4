"""Citations of spec values inside description texts: `[[ engine.max_model_len // 1024 ]]`.

Spec text comes from strangers' pull requests, so it is data, never code. A citation is a small
expression language evaluated here, not by Jinja: field paths into the spec (`engine.speculative.model`,
`metadata.categories[0]`), integer and decimal literals, `+ - * / // %` and parentheses. Nothing else
parses, so no text can reach Python objects, the environment or files. Work is bounded: a citation is at
most MAX_CITATION characters and a text at most MAX_CITATIONS citations, literals are short, and every
intermediate number must stay within MAX_MAGNITUDE (no `10**10`-sized strings or loops exist to build).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_CITATION = 200
MAX_CITATIONS = 200
MAX_MAGNITUDE = 2**63
OPEN, CLOSE = "[[", "]]"

_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d{1,18}(?:\.\d{1,18})?)|(?P<name>[A-Za-z_][A-Za-z0-9_]{0,63})"
    r"|(?P<op>//|[-+*/%().\[\]]))"
)
Number = int | float


class CitationError(ValueError):
    """A citation that does not parse, cites a missing field, or computes something out of bounds."""

    def __init__(self, message: str, unset: str | None = None) -> None:
        super().__init__(message)
        self.unset = unset  # the cited path that holds no value, when that is what went wrong


@dataclass(frozen=True)
class _Path:
    parts: tuple[str | int, ...]

    def text(self) -> str:
        out = ""
        for part in self.parts:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


class _Parser:
    """Recursive descent over a token list; depth is bounded by the citation's length."""

    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(source):
            if source[position:].strip() == "":
                break
            match = _TOKEN.match(source, position)
            if match is None or match.end() == position:
                raise CitationError(f"unexpected {source[position:].strip()[:1]!r} in [[{source}]]")
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind)))
            position = match.end()
        self.index = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise CitationError("the citation ends too early")
        self.index += 1
        return token

    def expect(self, value: str) -> None:
        kind, text = self.take()
        if (kind, text) != ("op", value):
            raise CitationError(f"expected {value!r}, found {text!r}")

    def parse(self) -> Any:
        if not self.tokens:
            raise CitationError("empty citation")
        tree = self.sum()
        extra = self.peek()
        if extra is not None:
            raise CitationError(f"unexpected {extra[1]!r}")
        return tree

    def sum(self) -> Any:
        tree = self.product()
        while (token := self.peek()) is not None and token in (("op", "+"), ("op", "-")):
            self.take()
            tree = (token[1], tree, self.product())
        return tree

    def product(self) -> Any:
        tree = self.unary()
        while (token := self.peek()) is not None and token[0] == "op" and token[1] in ("*", "/", "//", "%"):
            self.take()
            tree = (token[1], tree, self.unary())
        return tree

    def unary(self) -> Any:
        if self.peek() == ("op", "-"):
            self.take()
            return ("neg", self.unary())
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "number":
            return float(text) if "." in text else int(text)
        if (kind, text) == ("op", "("):
            tree = self.sum()
            self.expect(")")
            return tree
        if kind == "name":
            parts: list[str | int] = [text]
            while (token := self.peek()) is not None and token in (("op", "."), ("op", "[")):
                self.take()
                if token[1] == ".":
                    kind, text = self.take()
                    if kind != "name":
                        raise CitationError(f"expected a field name after '.', found {text!r}")
                    parts.append(text)
                else:
                    kind, text = self.take()
                    if kind != "number" or "." in text:
                        raise CitationError(f"expected a list index after '[', found {text!r}")
                    parts.append(int(text))
                    self.expect("]")
            return _Path(tuple(parts))
        raise CitationError(f"unexpected {text!r}")


class _Missing(CitationError):
    """A cited field the spec does not have; `evaluate` names the citation that cites it."""


def _lookup(path: _Path, context: Mapping[str, Any]) -> Any:
    value: Any = context
    cited = path.text()
    for depth, part in enumerate(path.parts):
        here = _Path(path.parts[:depth]).text()
        if isinstance(part, int):
            if not isinstance(value, list):
                raise _Missing(f"cites {cited}, but {here} is not a list")
            if part >= len(value):
                raise _Missing(f"cites {cited}, but {here} has {len(value)} item(s)")
            value = value[part]
        else:
            if value is None and depth:
                raise _Missing(f"cites {cited}, but {here} is not set (set it, or remove the citation)", here)
            if not isinstance(value, Mapping) or part not in value:
                raise _Missing(f"cites {cited}, but {_Path(path.parts[: depth + 1]).text()} is not a field of the spec")
            value = value[part]
    return value


def _number(value: Any, shown: str) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CitationError(f"{shown} is not a number, so it cannot take part in arithmetic")
    return value


def _bounded(value: Number) -> Number:
    if not -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:
        raise CitationError("a number in the citation grows past 2**63")
    return value


def _evaluate(tree: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(tree, _Path):
        return _lookup(tree, context)
    if isinstance(tree, int | float):
        return tree
    if tree[0] == "neg":
        return _bounded(-_number(_evaluate(tree[1], context), "the operand of '-'"))
    operator, left, right = tree
    a = _number(_evaluate(left, context), f"the left side of {operator!r}")
    b = _number(_evaluate(right, context), f"the right side of {operator!r}")
    if operator in ("/", "//", "%") and b == 0:
        raise CitationError("division by zero")
    result: Number
    if operator == "+":
        result = a + b
    elif operator == "-":
        result = a - b
    elif operator == "*":
        result = a * b
    elif operator == "/":
        result = a / b
    elif operator == "//":
        result = a // b
    else:
        result = a % b
    return _bounded(result)


def _show(value: Any, source: str, tree: Any) -> str:
    if value is None:
        raise CitationError(
            f"[[ {source} ]] cites a field that is not set", tree.text() if isinstance(tree, _Path) else None
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise CitationError(
        f"[[ {source} ]] cites a {'list' if isinstance(value, list) else 'mapping'}; cite one of its values"
    )


def _paths(tree: Any) -> set[str]:
    """The field paths a parsed citation reads, as written (engine.speculative.model)."""
    if isinstance(tree, _Path):
        return {tree.text()}
    if isinstance(tree, tuple):
        return {path for part in tree[1:] for path in _paths(part)}
    return set()


def _marked(path: str, key: str) -> bool:
    return path == key or path.startswith((f"{key}.", f"{key}["))


def evaluate(source: str, context: Mapping[str, Any], marks: Mapping[str, str] | None = None) -> str:
    """One citation's text (what is between [[ and ]]) evaluated against the context, as printed. `marks` maps a
    field path to a text printed after any citation that reads it or a field under it (a measured figure whose
    settings changed since: " (measured on 1.1.0, settings changed since)")."""
    if len(source) > MAX_CITATION:
        raise CitationError(f"a citation is at most {MAX_CITATION} characters")
    try:
        tree = _Parser(source).parse()
        shown = _show(_evaluate(tree, context), source.strip(), tree)
    except _Missing as exc:  # name the citation and the field path it cites
        raise CitationError(f"[[ {source.strip()} ]] {exc}", exc.unset) from None
    read = sorted(_paths(tree))
    return shown + "".join(
        dict.fromkeys(mark for key, mark in sorted((marks or {}).items()) if any(_marked(path, key) for path in read))
    )


def cite(
    text: str, context: Mapping[str, Any], marks: Mapping[str, str] | None = None
) -> tuple[str, list[CitationError]]:
    """The text with every [[ ... ]] replaced by the value it cites (and its mark, see evaluate), and what went
    wrong with each citation that could not be: all of them, so one run shows every mistake (a citation that
    fails stays as typed)."""
    out: list[str] = []
    errors: list[CitationError] = []
    position = 0
    count = 0
    while True:
        start = text.find(OPEN, position)
        out.append(text[position:] if start < 0 else text[position:start])  # "]]" alone is text
        if start < 0:
            break
        end = text.find(CLOSE, start + len(OPEN))
        if end < 0:
            errors.append(CitationError(f"{OPEN!r} without a closing {CLOSE!r}"))
            break
        count += 1
        if count > MAX_CITATIONS:
            errors.append(CitationError(f"at most {MAX_CITATIONS} citations per text"))
            break
        inner = text[start + len(OPEN) : end]
        if OPEN in inner:
            errors.append(CitationError("citations do not nest"))
            break
        try:
            out.append(evaluate(inner, context, marks))
        except CitationError as exc:
            errors.append(exc)
            out.append(text[start : end + len(CLOSE)])
        position = end + len(CLOSE)
    return "".join(out), errors


def render(text: str, context: Mapping[str, Any], marks: Mapping[str, str] | None = None) -> str:
    """The text with every [[ ... ]] replaced by the value it cites; the first mistake raised."""
    rendered, errors = cite(text, context, marks)
    if errors:
        raise errors[0]
    return rendered
