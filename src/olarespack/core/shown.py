"""What bench prints, made safe to print: the API key the user gave masked wherever it shows (a server may
echo the Authorization header into an error body or a model id; whatever the key's length, and in its Bearer,
JSON-escaped and percent-encoded forms), and strangers' text printed as text (core.text.printable). Applied to
every message, table line, JSON value and record value bench writes."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from olarespack.core.redact import redact
from olarespack.core.text import printable

MASK = "[api key]"


class Shown:
    """The masking of one bench's key."""

    def __init__(self, api_key: str | None) -> None:
        forms: set[str] = set()
        if api_key:
            for form in (
                api_key,
                json.dumps(api_key, ensure_ascii=False)[1:-1],
                json.dumps(api_key)[1:-1],
                quote(api_key, safe=""),
                printable(api_key),
            ):
                forms |= {form, f"Bearer {form}"}
        self._forms = sorted(forms - {""}, key=len, reverse=True)  # the Bearer form before the bare key

    def masked(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, MASK)
        return text

    def cut(self, text: str, limit: int) -> str:
        """`text` masked and cut at `limit` characters, a key (or its first characters, at least 4) ending the cut
        text masked too: a server's echo cut inside the key must not print the key's first half."""
        text = self.masked(text)[:limit]
        for form in self._forms:
            for length in range(min(len(form) - 1, len(text)), 3, -1):
                if text.endswith(form[:length]):
                    return text[:-length] + MASK
        return text

    def text(self, text: str) -> str:
        """One line of output: masked, controls escaped, token-shaped secrets redacted; masked once more after
        escaping, for a key whose escaped form is what shows."""
        return redact(self.masked(printable(self.masked(text))))

    def lines(self, text: str) -> str:
        """A message of several lines (each line as text)."""
        return "\n".join(self.text(line) for line in text.split("\n"))

    def data(self, value: Any) -> Any:
        """JSON data with every string masked (json.dumps escapes the controls)."""
        if isinstance(value, str):
            return redact(self.masked(value))
        if isinstance(value, dict):
            return {self.data(k) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value
