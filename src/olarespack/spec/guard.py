"""Guards for text that comes from strangers: a spec's strings are checked here, on the parsed YAML
before the models see it, so every finding names its field path.

- Control characters (NUL, escape sequences, bidi overrides, line separators) are refused everywhere;
  a newline only where the field is prose (descriptions, notes).
- `{{` is refused everywhere (Helm and Olares would execute it as a Go template) but in a chat template's
  text, which the chart keeps verbatim in files/, outside what Helm renders.
- `[[`, which opens a citation, is refused outside the fields that may cite spec values, where it would be
  printed as typed instead of citing. Other brackets are people's text (a Markdown link such as
  `[#123](https://...)`, a closing `]]`): spec text is data for olarespack's templates, never a template.
- Token-shaped values (Hugging Face, GitHub, OpenAI, AWS, Slack keys, JWTs, private keys, `Bearer x`)
  are refused anywhere: whatever a spec holds reaches a chart, a market catalog or a CI log.
- Every string has a hard length cap, whatever its field (the models set tighter ones).

core/redact.py masks token shapes in any text olarespack prints, so a message that quotes a value never
carries a credential into a log.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from olarespack.core.redact import token_kind

MAX_STRING = 65_536
# Fields whose text is prose (newlines allowed) and may cite spec values with [[ ... ]].
_DESCRIPTIONS = r"metadata\.(?:locales\.[^.]+\.)?(?:description|full_description)"
CITING_FIELDS = re.compile(rf"^{_DESCRIPTIONS}$")
PROSE_FIELDS = re.compile(rf"^(?:{_DESCRIPTIONS}|changelog\[\d+\]\.note)$")
CITATION_OPEN = "[["
# Fields copied verbatim into a chart file outside templates/ (a chat template, itself Jinja): neither Helm nor
# olarespack renders them, so their {{ }} and [[ ]] are the file's own; newlines are allowed, control
# characters and tokens are not.
VERBATIM_FIELDS = re.compile(r"^engine\.chat_template\.text$")
# Format characters that reorder or hide text (Trojan Source) are refused with the control characters.
_HIDDEN_FORMAT = frozenset("\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")


def walk_strings(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, text) for every string in parsed YAML, keys included (a key's path is its own)."""
    if isinstance(data, dict):
        for key, value in data.items():
            child = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                yield child, key
            yield from walk_strings(value, child)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from walk_strings(item, f"{path}[{i}]")
    elif isinstance(data, str):
        yield path, data


def _noncharacter(code: int) -> bool:
    """Unicode's 66 noncharacters: U+FDD0-U+FDEF and the last two code points of every plane."""
    return 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE


def forbidden_character(text: str, prose: bool) -> str | None:
    """What is wrong with the first character a field must not hold, or None. Helm reads every chart file as
    YAML 1.1, whose printable set leaves out C0 and C1 controls, surrogates, U+FFFE and U+FFFF ("control
    characters are not allowed"): such a value would build a chart neither helm nor Olares can load."""
    for char in text:
        code, category = ord(char), unicodedata.category(char)
        if char in "\n\t":
            if not prose:
                return (
                    f"the control character U+{code:04X}, which is not allowed in this field (newlines and "
                    "tabs only in descriptions and notes)"
                )
        elif category in ("Cc", "Cs", "Zl", "Zp") or char in _HIDDEN_FORMAT:
            name = unicodedata.name(char, "")
            kind = "lone surrogate" if category == "Cs" else "control character"
            return f"the {kind} {name + ' ' if name else ''}U+{code:04X}, which is not allowed in spec text"
        elif 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:
            # helm refuses U+FFFE and U+FFFF; no noncharacter is text (Unicode keeps the 66 for a program's
            # internal use), so a spec holding one was mangled on its way here
            stops = ", which helm cannot load" if code in (0xFFFE, 0xFFFF) else ", which is not text"
            return f"the noncharacter U+{code:04X}{stops}"
    return None


def string_problems(data: Any) -> Iterator[tuple[str, str, str, str]]:
    """(field path, message, fix, rule) for every string in the spec that breaks a guard."""
    for path, text in walk_strings(data):
        if len(text) > MAX_STRING:
            yield path, f"{len(text)} characters; no spec text may exceed {MAX_STRING}", "shorten it", "spec-format"
            continue
        verbatim = bool(VERBATIM_FIELDS.match(path))
        prose = verbatim or bool(PROSE_FIELDS.match(path))
        bad = forbidden_character(text, prose)
        if bad:
            yield path, f"contains {bad}", "remove it", "control-character"
        if verbatim:
            pass
        elif "{{" in text:
            yield (
                path,
                "contains '{{', which Helm and Olares would execute as a Go template",
                "remove the {{ }} markers; cite spec values with [[ ... ]] in descriptions",
                "template-marker",
            )
        if CITATION_OPEN in text and not verbatim and not CITING_FIELDS.match(path):
            yield (
                path,
                f"contains {CITATION_OPEN!r}: only descriptions may cite spec values with [[ ... ]]",
                "remove it",
                "template-marker",
            )
        kind = token_kind(text)
        if kind:
            yield (
                path,
                f"holds what looks like {kind}: a credential typed in a spec ends up in the chart, the "
                "market catalog and CI logs",
                "remove it: the chart passes Olares' Hugging Face token through a Secret",
                "secret-in-clear",
            )
