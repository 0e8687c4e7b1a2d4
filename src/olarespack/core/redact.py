"""Token-shaped secrets: how to recognize them in spec text, and how every message olarespack prints masks
them (CI logs and pull-request comments are public)."""

from __future__ import annotations

import re

TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("an OpenAI-style API key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a bearer credential", re.compile(r"\b(?:Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{16,}", re.IGNORECASE)),
)


def token_kind(text: str) -> str | None:
    for kind, pattern in TOKEN_PATTERNS:
        if pattern.search(text):
            return kind
    return None


def redact(text: str) -> str:
    """Token-shaped substrings masked, keeping a short prefix so the reader can find the value."""
    for _, pattern in TOKEN_PATTERNS:
        text = pattern.sub(lambda m: m.group()[:4] + "…[redacted]", text)
    return text
