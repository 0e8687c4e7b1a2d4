"""Secrets a chart carries in its server's command line, env or texts: a spec never holds one. The Hugging
Face token becomes the spec's chart's own Secret reference (the user's token, given to what downloads the
model); any other secret, and a token anywhere else, is named so the spec is not written with it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olarespack.check.render import SECRET_SENTINEL

# Hugging Face user and organization tokens, GitHub tokens: what a chart may have pasted in as text
TOKEN_TEXT = re.compile(r"(?:hf_|api_org_)[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}")
HF_TOKEN_FLAGS = frozenset({"--hf-token", "-hft"})
# options whose value is a secret whatever it looks like (--api-key, --ssl-keyfile-password, ...)
SECRET_FLAG = re.compile(r"--?(?:[a-z0-9]+-)*(?:token|api-key|apikey|password|secret)(?:-file)?")


def is_secret(text: str) -> bool:
    """The Olares Hugging Face token (lint renders it as a sentinel) or a token pasted in as text."""
    return SECRET_SENTINEL in text or TOKEN_TEXT.search(text) is not None


def without_tokens(argv: list[str], notes: list[str], unexpressed: list[str]) -> list[str]:
    """The command line without its secrets. The Hugging Face token (--hf-token, or any argument holding a
    token) is the spec's chart's Secret: dropped, and the change noted; another secret option (--api-key)
    has no place in a spec: named."""
    kept: list[str] = []
    i = 0
    while i < len(argv):
        item = argv[i]
        flag, inline = item.split("=", 1) if item.startswith("--") and "=" in item else (item, None)
        if item.startswith("-") and (flag in HF_TOKEN_FLAGS or SECRET_FLAG.fullmatch(flag)):
            following = argv[i + 1] if i + 1 < len(argv) else None
            takes = inline is None and following is not None and not following.startswith("-")
            i += 2 if takes else 1
            if flag in HF_TOKEN_FLAGS:
                notes.append(_hf_note(flag))
            else:
                unexpressed.append(
                    f"server argument {flag}: its value is a secret; a spec never holds one and "
                    "its chart has no Secret for it"
                )
            continue
        i += 1
        if not is_secret(item):
            kept.append(item)
            continue
        flag_before = kept.pop() if kept and kept[-1].startswith("-") and "=" not in kept[-1] else None
        notes.append(_hf_note(flag_before or (item.split("=", 1)[0] if item.startswith("-") else "(an argument)")))
    return kept


def _hf_note(shown: str) -> str:
    return (
        f"server argument {shown}: the token is not copied; the spec's chart gives the user's Hugging Face "
        "token from its Secret to what downloads the model"
    )


def token_fields(data: Any, path: str = "") -> Iterator[str]:
    """The field paths of a spec's data whose text holds a token."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from token_fields(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from token_fields(value, f"{path}[{index}]")
    elif isinstance(data, str) and is_secret(data):
        yield path
