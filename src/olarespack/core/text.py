"""Strangers' text (a server's model ids, error bodies and headers, a spec's keys) printed as text: nothing in
it that a terminal or a CI log obeys. C0 and C1 controls (ESC starts the escape sequences that set a window
title, draw an OSC 8 hyperlink or clear the screen; CR and LF forge lines), DEL, the line and paragraph
separators and the bidirectional overrides and isolates (which reorder what the reader sees) are written as
\\xNN / \\uNNNN escapes, so the text stays on one line and reads as what it is."""

from __future__ import annotations

import re

# C0, DEL, C1; U+061C and U+200E-U+200F (bidi marks), U+202A-U+202E (embeddings, overrides), U+2066-U+2069
# (isolates); U+2028-U+2029 (separators some terminals and editors break lines at); U+FEFF (zero-width no-break
# space, which hides a character boundary)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def printable(text: str) -> str:
    """`text` with every character a terminal would obey, or that reorders or breaks the line, escaped."""
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", text
    )
