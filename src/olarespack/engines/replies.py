"""What an OpenAI-compatible server answered, read bounded (engines/client.py asks, bench reads): a completion's
usage checked against what it could be, its text, a whole JSON answer read into a Reply, and the error bench
reports as exit 1 naming the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from olarespack.core.errors import OlaresPackError
from olarespack.core.shown import Shown
from olarespack.core.text import printable


class BenchError(OlaresPackError):
    """The server could not be measured: unreachable, not OpenAI-compatible, or answering what cannot be."""


@dataclass
class Reply:
    """One completion as read: its usage, the client's clock, and the final body the engine reads timings from."""

    completion_tokens: int
    prompt_tokens: int | None
    seconds: float  # request sent to the completion's end
    first_token_s: float | None = None  # request sent to the first event carrying text (streamed only)
    last_token_s: float | None = None
    body: dict[str, Any] = field(default_factory=dict)  # usage, timings (a stream's last), a whole answer's choices


def check_usage(usage: object, max_tokens: int, where: str) -> tuple[int, int | None]:
    """completion_tokens and prompt_tokens of a usage object, refused when they cannot be."""
    if not isinstance(usage, dict):
        raise BenchError(
            f"{where}: the answer carries no usage object (completion_tokens): not an OpenAI-compatible completion"
        )
    completion, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    if isinstance(completion, bool) or not isinstance(completion, int):
        raise BenchError(f"{where}: usage.completion_tokens is {printable(str(completion)[:40])!r}, not a count")
    if not 0 <= completion <= 2 * max_tokens:
        raise BenchError(f"{where}: impossible usage: {completion} completion tokens for max_tokens {max_tokens}")
    if prompt is not None and (isinstance(prompt, bool) or not isinstance(prompt, int) or prompt < 0):
        raise BenchError(f"{where}: impossible usage: prompt_tokens is {printable(str(prompt)[:40])!r}")
    return completion, prompt


def text_of(choice: Any) -> str:
    if not isinstance(choice, dict):
        return ""
    found = choice.get("delta")
    delta: dict[str, Any] = found if isinstance(found, dict) else {}
    for value in (delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning"), choice.get("text")):
        if isinstance(value, str) and value:
            return value
    return ""


def reply_of(answer: object, max_tokens: int, where: str, seconds: float, key: Shown | None = None) -> Reply:
    """A non-streamed completion (a JSON answer) read into a Reply (`key`: the API key an error may echo)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        if isinstance(answer, dict) and "error" in answer:
            said = printable((key or Shown(None)).cut(str(answer["error"]), 300))
            raise BenchError(f"{where}: the server answered an error: {said}")
        raise BenchError(f"{where}: the answer has no choices list: not an OpenAI-compatible completion")
    completion, prompt = check_usage(answer.get("usage"), max_tokens, where)
    return Reply(
        completion, prompt, seconds, body={k: answer[k] for k in ("usage", "timings", "choices") if k in answer}
    )
