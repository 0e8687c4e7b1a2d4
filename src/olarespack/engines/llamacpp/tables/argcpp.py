"""Read llama-server's command-line surface out of llama.cpp's `common/arg.cpp` source text.

The parser never compiles or runs the source: it scans the C++ text of each `add_opt(common_arg(...))` call, the
`.set_examples/.set_excludes/.set_env` chain after it and the `if (ex == ...)` blocks around it, the way
`common_params_parser_init` filters options for `LLAMA_EXAMPLE_SERVER`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SERVER = "LLAMA_EXAMPLE_SERVER"
COMMON = "LLAMA_EXAMPLE_COMMON"

_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_ADD_OPT = re.compile(r"\badd_opt\s*\(\s*common_arg\s*[({]")
_CHAIN = re.compile(r"\.\s*(set_\w+)\s*\(")
_ENUM = re.compile(r"\bLLAMA_EXAMPLE_\w+")
_EXAMPLE_LIST = re.compile(
    r"(?:std::initializer_list|std::vector|std::set)\s*<\s*(?:enum\s+)?llama_example\s*>\s*(\w+)\s*=\s*\{"
)
# a function of one `const std::string &` (is_truthy, parse_bool_value...): handlers validate through these
_FUNC = re.compile(r"\b\w+\s+(?:\w+::)?(\w+)\s*\(\s*const\s+std::string\s*&\s*\w+\s*\)\s*\{")
_COMPARED = re.compile(r'\b(?:value|s|str|name|arg)\s*==\s*"((?:[^"\\\n]|\\.)*)"')
_CALL = re.compile(r"\b(\w+)\s*\(")
_GGML_TYPE = re.compile(r"\bGGML_TYPE_(\w+)")
_SPEC_MAP = re.compile(r"common_speculative_type_from_name_map\s*=\s*\{")
_SPEC_ENTRY = re.compile(r'\{\s*"([^"]+)"\s*,\s*COMMON_SPECULATIVE_TYPE_\w+\s*\}')
_REMOVED_CALL = re.compile(r"\barg_removed\s*\(")
_DEPRECATED_WARN = re.compile(r'LOG_WRN\s*\(\s*"(DEPRECATED[^"]*)"')
_CONDITION_ATOM = re.compile(r"\bex\s*(==|!=)\s*(LLAMA_EXAMPLE_\w+)")


class ArgCppError(ValueError):
    """The text is not a `common/arg.cpp` this reader understands."""


def strip_comments(text: str) -> str:
    """Blank out comments (keeping offsets and newlines) so braces and quotes inside them are not read as code."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2 : open_paren]
            end = text.find(")" + delim + '"', open_paren)
            i = n if end < 0 or open_paren < 0 else end + len(delim) + 2
        elif ch in "\"'":
            i = _skip_quoted(text, i)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
            i = end
        else:
            i += 1
    return "".join(out)


def _skip_quoted(text: str, i: int) -> int:
    quote, i = text[i], i + 1
    while i < len(text) and text[i] != quote and text[i] != "\n":
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _matching(code: str, start: int) -> int:
    """Offset just past the bracket that closes the one at `start` (strings and char literals skipped)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    i = start
    while i < len(code):
        ch = code[i]
        if ch in "\"'":
            i = _skip_quoted(code, i)
            continue
        if ch == "R" and code.startswith('R"', i):
            open_paren = code.find("(", i + 2)
            delim = code[i + 2 : open_paren]
            i = code.find(")" + delim + '"', open_paren) + len(delim) + 2
            continue
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")}]":
            if not stack or stack.pop() != ch:
                raise ArgCppError(f"unbalanced '{ch}' at line {code.count(chr(10), 0, i) + 1}")
            if not stack:
                return i + 1
        i += 1
    raise ArgCppError(f"unclosed bracket opened at line {code.count(chr(10), 0, start) + 1}")


def _split_top(code: str) -> list[str]:
    """Split an argument list (without its outer brackets) at top-level commas."""
    parts, depth, i, last = [], 0, 0, 0
    while i < len(code):
        ch = code[i]
        if ch in "\"'":
            i = _skip_quoted(code, i)
            continue
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(code[last:i].strip())
            last = i + 1
        i += 1
    parts.append(code[last:].strip())
    return [p for p in parts if p]


def _strings(code: str) -> list[str]:
    return [m.group(1).encode().decode("unicode_escape") for m in _STRING.finditer(code)]


def _literal(expr: str) -> str | None:
    """The text of an expression made only of adjacent string literals, else None."""
    if not expr.startswith('"') or _STRING.sub("", expr).strip():
        return None
    return "".join(_strings(expr))


@dataclass
class _Block:
    header: str
    condition: bool | None  # value of an `if (ex ...)` header for the server; None when not about `ex`


@dataclass
class Surface:
    options: list[dict[str, Any]] = field(default_factory=list)  # llama-server's, in source order
    filter_read: bool = True  # False when some option's example set could not be resolved (it is then kept)
    all_names: list[str] = field(default_factory=list)  # every example's option names (not the --no-* forms)


def _eval_condition(header: str) -> bool | None:
    """Evaluate `if (ex == A || ex != B ...)` for ex = server; None when the header is not such a test."""
    match = re.match(r"\s*(?:else\s+)?if\s*\((.*)\)\s*$", header, re.S)
    if not match or not _CONDITION_ATOM.search(match.group(1)):
        return None
    expr = _CONDITION_ATOM.sub(lambda m: str((m.group(2) == SERVER) == (m.group(1) == "==")), match.group(1))
    tokens = re.findall(r"True|False|\|\||&&|!|\(|\)|\S", expr)
    text = " ".join(tokens)
    # rewrite innermost forms until one value is left; anything else in the header means "not an ex test"
    rules: list[tuple[str, str | Callable[[re.Match[str]], str]]] = [
        (r"! True", "False"), (r"! False", "True"), (r"\( (True|False) \)", r"\1"),
        (r"(True|False) && (True|False)", lambda m: str(m.group(1) == m.group(2) == "True")),
        (r"(True|False) \|\| (True|False)", lambda m: str("True" in (m.group(1), m.group(2)))),
    ]  # fmt: skip
    while text not in ("True", "False"):
        before = text
        for pattern, repl in rules:
            text = re.sub(pattern, repl, text, count=1)
        if text == before:
            return None
    return text == "True"


def _statement_add_opts(code: str, body_start: int, body_end: int) -> list[tuple[int, list[bool | None]]]:
    """Each `add_opt(common_arg...)` statement of the function body with the server-conditions of the
    `if (ex ...)` / `else` blocks around it (one pass: calls and lambdas are skipped whole)."""
    found: list[tuple[int, list[bool | None]]] = []
    stack: list[_Block] = []
    last_closed: _Block | None = None
    i, stmt_start = body_start, body_start
    while i < body_end:
        ch = code[i]
        if ch in "\"'":
            i = _skip_quoted(code, i)
            continue
        if ch == "{":
            header = code[stmt_start:i].strip()
            cond = _eval_condition(header)
            if cond is None and header == "else" and last_closed and last_closed.condition is not None:
                cond = not last_closed.condition
            stack.append(_Block(header, cond))
            stmt_start = i + 1
        elif ch == "}":
            last_closed = stack.pop() if stack else None
            stmt_start = i + 1
        elif ch == ";":
            stmt_start = i + 1
        elif ch == "(":
            statement = _ADD_OPT.match(code, stmt_start + len(code[stmt_start:i]) - len(code[stmt_start:i].lstrip()))
            if statement:
                found.append((statement.start(), [b.condition for b in stack]))
            i = _matching(code, i)
            continue
        i += 1
    return found


def _helper_choices(code: str) -> dict[str, list[str]]:
    """Values each one-string-argument helper in the file accepts, following helpers it calls."""
    bodies: dict[str, str] = {}
    for m in _FUNC.finditer(code):
        brace = m.end() - 1
        bodies.setdefault(m.group(1), code[brace : _matching(code, brace)])
    resolved: dict[str, list[str]] = {}

    def values(name: str, seen: frozenset[str]) -> list[str]:
        body = bodies[name]
        found = [s.encode().decode("unicode_escape") for s in _COMPARED.findall(body)]
        for call in _CALL.findall(body):
            if call in bodies and call not in seen:
                found += values(call, seen | {call})
        return list(dict.fromkeys(found))

    for name in bodies:
        resolved[name] = values(name, frozenset({name}))
    return {k: v for k, v in resolved.items() if v}


def cache_type_names(code: str) -> list[str]:
    """`kv_cache_types` as ggml names: ggml_type_name() is the enum suffix in lower case (GGML_TYPE_Q8_0 -> q8_0)."""
    m = re.search(r"\bkv_cache_types\s*=\s*\{", code)
    if not m:
        return []
    body = code[m.end() - 1 : _matching(code, m.end() - 1)]
    return [t.lower() for t in _GGML_TYPE.findall(body)]


def spec_type_names(source: str) -> list[str]:
    """The names `common_speculative_type_from_name_map` accepts, in table order."""
    code = strip_comments(source)
    m = _SPEC_MAP.search(code)
    if not m:
        return []
    body = code[m.end() - 1 : _matching(code, m.end() - 1)]
    return _SPEC_ENTRY.findall(body)


def _example_lists(code: str) -> dict[str, list[str]]:
    lists = {}
    for m in _EXAMPLE_LIST.finditer(code):
        brace = m.end() - 1
        lists[m.group(1)] = _ENUM.findall(code[brace : _matching(code, brace)])
    return lists


def _chain(code: str, start: int, end: int) -> dict[str, str]:
    """`.set_xxx(args)` calls between the end of `common_arg(...)` and the end of `add_opt(...)`."""
    calls: dict[str, str] = {}
    i = start
    while True:
        m = _CHAIN.search(code, i, end)
        if not m:
            return calls
        close = _matching(code, m.end() - 1)
        calls[m.group(1)] = code[m.end() : close - 1].strip()
        i = close


def _in_server(chain: dict[str, str], lists: dict[str, list[str]]) -> bool | None:
    examples: list[str] | None = [COMMON]
    if "set_examples" in chain:
        arg = chain["set_examples"]
        examples = _ENUM.findall(arg) if arg.startswith("{") else lists.get(arg)
    if examples is None:
        return None
    excluded = _ENUM.findall(chain.get("set_excludes", ""))
    return (SERVER in examples or COMMON in examples) and SERVER not in excluded


def _function_body(code: str, name: str) -> int:
    """Offset just past the `{` of the definition of `name` (not a declaration or call), or -1."""
    for m in re.finditer(r"\b" + name + r"\s*\(", code):
        after = _matching(code, m.end() - 1)
        brace = re.match(r"\s*\{", code[after:])
        if brace:
            return after + brace.end()
    return -1


def parse_arg_cpp(source: str, spec_table_source: str = "") -> Surface:
    """Every option `common_params_parser_init` adds for llama-server, with names, value, env, choices, removal."""
    code = strip_comments(source)
    body_start = _function_body(code, "common_params_parser_init")
    if body_start < 0:
        raise ArgCppError("no common_params_parser_init(...) { ... } definition: not llama.cpp's common/arg.cpp")
    body_end = _matching(code, body_start - 1)
    helpers = _helper_choices(code)
    cache_types = cache_type_names(code)
    spec_types = spec_type_names(spec_table_source)
    lists = _example_lists(code)
    surface = Surface()
    for start, conditions in _statement_add_opts(code, body_start, body_end - 1):
        if False in conditions:
            continue
        m = _ADD_OPT.match(code, start)
        assert m is not None
        add_open = code.index("(", m.start())
        add_close = _matching(code, add_open)
        arg_open = m.end() - 1
        arg_close = _matching(code, arg_open)
        line = code.count("\n", 0, m.start()) + 1
        parts = _split_top(code[arg_open + 1 : arg_close - 1])
        if len(parts) < 3 or not parts[0].startswith("{"):
            raise ArgCppError(f"common_arg at line {line} does not start with a {{names}} list")
        chain = _chain(code, arg_close, add_close)
        in_server = _in_server(chain, lists)
        if in_server is False:
            continue
        if in_server is None:
            surface.filter_read = False
        surface.options.append(_option(parts, chain, line, helpers, cache_types, spec_types))
    names: set[str] = set()
    for m in _ADD_OPT.finditer(code):
        arg_open = m.end() - 1
        parts = _split_top(code[arg_open + 1 : _matching(code, arg_open) - 1])
        names.update(_strings(parts[0]) if parts else [])
    surface.all_names = sorted(names)
    if not surface.options:
        raise ArgCppError("no add_opt(common_arg(...)) call inside common_params_parser_init")
    return surface


def _option(
    parts: list[str],
    chain: dict[str, str],
    line: int,
    helpers: dict[str, list[str]],
    cache_types: list[str],
    spec_types: list[str],
) -> dict[str, Any]:
    names = _strings(parts[0])
    negative = _strings(parts[1]) if parts[1].startswith("{") else []
    takes_value = not negative and len(parts) >= 4
    handler = parts[-1]
    option: dict[str, Any] = {"line": line, "names": names, "takes_value": takes_value}
    if negative:
        option["negative"] = negative
    if takes_value:
        hint = _literal(parts[1])
        if hint is not None:
            option["value_hint"] = hint
        if len(parts) == 5:
            option["values"] = 2
    env = _literal(chain.get("set_env", ""))
    if env:
        option["env"] = env
    choices, exhaustive = _choices(handler, helpers, cache_types, spec_types) if takes_value else ([], False)
    if choices:
        # values the handler names but lets other text through (-ngl auto|all|N) are not a closed set
        option["choices" if exhaustive else "special_values"] = choices
    if _REMOVED_CALL.search(handler) or "has been removed" in handler:
        texts = [s for s in _strings(handler) if s]
        prefix = "the argument has been removed. " if _REMOVED_CALL.search(handler) else ""
        option["removed"] = prefix + (texts[-1] if texts else "")
    deprecated = _DEPRECATED_WARN.search(handler)
    if deprecated:
        option["deprecated"] = deprecated.group(1).replace("\\n", "").strip()
    return option


def _choices(
    handler: str, helpers: dict[str, list[str]], cache_types: list[str], spec_types: list[str]
) -> tuple[list[str], bool]:
    """Values the handler accepts by name, and whether anything else is refused."""
    if "kv_cache_type_from_str" in handler:
        return cache_types, bool(cache_types)
    if re.search(r"common_speculative_types?_from_names?\b", handler):
        return spec_types, bool(spec_types)
    found = [s.encode().decode("unicode_escape") for s in _COMPARED.findall(handler)]
    refuses = bool(re.search(r"\bthrow\b", handler))
    for call in _CALL.findall(handler):
        if call in helpers:
            found += helpers[call]
            refuses = refuses or call == "parse_bool_value"
    return list(dict.fromkeys(found)), refuses
