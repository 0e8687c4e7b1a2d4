"""The options `olarespack bench`'s verbs share, declared once: how each request is made (Request: runs, tokens,
sampling, prompt, timeouts, the GPU mode it is recorded with), how the result is shown (--json, --plot), where a
live server is (--url, --api-key, --model) and where the app is installed (--user, --namespace)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from olarespack.core.errors import OlaresPackError, ProblemsError

if TYPE_CHECKING:
    from olarespack.bench.run import Settings
    from olarespack.core.shown import Shown
    from olarespack.engines.client import Limits

F = TypeVar("F", bound=Callable[..., Any])
EXAMPLES = {
    "run": (
        "olarespack bench run gemma4-vision --url http://127.0.0.1:8000",
        "olarespack bench run apps/gemma4-vision.yaml --url URL --hardware rtx5090-laptop --record",
        "olarespack bench run gemma4-vision --responses bench.log --hardware rtx5090-laptop --record",
    ),
    "box": (
        "olarespack bench box gemma4-vision --exec --user alice",
        "olarespack bench box gemma4-vision --job --namespace gemma-alice > job.yaml",
    ),
    "sweep": (
        "olarespack bench sweep apps/gemma4-audio.yaml engine.batch_size=256,512 --tiny --plot sweep.png",
        "olarespack bench sweep apps/gemma4-vision.yaml engine.max_num_seqs=2,4 --exec --user alice > sweep.sh",
        "olarespack bench sweep apps/gemma4-vision.yaml engine.max_num_seqs=2,4 --responses . --write",
    ),
    "grid": ("olarespack bench grid gemma4-vision --url URL --concurrency 1,2,4 --depth 0,8192",),
}


def examples(*verbs: str) -> str:
    """A command's epilog: its examples, kept as lines (\b)."""
    lines = [line for verb in verbs for line in EXAMPLES[verb]]
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


GPU_MODES = ("exclusive", "memory-slicing", "time-slicing")


@dataclass(frozen=True)
class Request:
    """How every request of a bench is made, and the GPU mode its figures are recorded with."""

    runs: int
    warmups: int
    max_tokens: int
    temperature: float
    top_p: float
    prompt_file: Path | None
    no_stream: bool
    run_timeout: float
    gpu_mode: str | None

    def settings(self, model: str, *, stream: bool | None = None) -> Settings:
        """The bench's settings for this model (the one place they are made)."""
        from olarespack.bench.run import Settings
        from olarespack.cli.bench_inputs import prompt_text

        prompt, prompt_name = prompt_text(self.prompt_file)
        return Settings(
            model=model,
            prompt=prompt,
            prompt_name=prompt_name,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            warmups=self.warmups,
            runs=self.runs,
            stream=not self.no_stream if stream is None else stream,
            gpu_mode=self.gpu_mode,
        )

    def limits(self) -> Limits:
        from olarespack.engines.client import Limits

        return Limits(max_tokens=self.max_tokens, run_s=self.run_timeout)


_REQUEST = (
    click.option("--runs", type=click.IntRange(1, 100), default=5, show_default=True, help="Measured runs."),
    click.option("--warmups", type=click.IntRange(0, 20), default=2, show_default=True, help="Uncounted runs first."),
    click.option(
        "--max-tokens",
        type=click.IntRange(1, 32_768),
        default=2000,
        show_default=True,
        help="Tokens each request asks for.",
    ),
    click.option("--temperature", type=click.FloatRange(0, 2), default=0.6, show_default=True),
    click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), default=0.95, show_default=True),
    click.option(
        "--prompt-file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Another prompt than the shipped Space Invaders one.",
    ),
    click.option("--no-stream", is_flag=True, help="Do not stream (no time to first token)."),
    click.option(
        "--run-timeout",
        type=click.FloatRange(1, 3600),
        default=600,
        show_default=True,
        help="Seconds one request may take in all.",
    ),
    click.option(
        "--gpu-mode",
        type=click.Choice(GPU_MODES),
        help="The GPU mode the app runs in on the box (Olares' GPU settings), recorded with the figures: "
        "time slicing cuts speculative decoding's speed.",
    ),
)
_REQUEST_NAMES = (
    "runs",
    "warmups",
    "max_tokens",
    "temperature",
    "top_p",
    "prompt_file",
    "no_stream",
    "run_timeout",
    "gpu_mode",
)


def request_options(command: F) -> F:
    """The request options, handed to the command as one `request: Request`."""

    @functools.wraps(command)
    def packed(*args: Any, **kwargs: Any) -> Any:
        request = Request(**{name: kwargs.pop(name) for name in _REQUEST_NAMES})
        return command(*args, request=request, **kwargs)

    for option in reversed(_REQUEST):
        packed = option(packed)
    return packed  # type: ignore[return-value]


def server_options(command: F) -> F:
    """What a live server wants: the key it takes and the model to ask for (its address is each verb's --url)."""
    command = click.option("--model", help="Model name to request (default: the spec's served name).")(command)
    return click.option(
        "--api-key", envvar="OLARESPACK_API_KEY", show_envvar=True, help="Bearer key the server wants (never printed)."
    )(command)


def shown_options(command: F) -> F:
    """How the result is shown besides the table."""
    command = click.option(
        "--plot",
        "plot_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Draw the figures into this PNG file.",
    )(command)
    return click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON object.")(command)


def box_options(command: F) -> F:
    """Where the app is installed in the box."""
    command = click.option("--namespace", help="The app's namespace in the box (default: APP-USER).")(command)
    return click.option("--user", help="The Olares user the app is installed for (its namespace is APP-USER).")(command)


def namespace_of(app: str, namespace: str | None, user: str | None) -> str:
    from olarespack.core.errors import UsageError

    if not namespace and not user:
        raise UsageError("the app's namespace in the box: give --user NAME (namespace APP-NAME) or --namespace")
    return namespace or f"{app}-{user}"


@contextmanager
def masking(shown: Shown) -> Iterator[None]:
    """The one place a bench's errors are masked: the API key never reaches a message, whatever raised it."""
    try:
        yield
    except ProblemsError as exc:
        exc.problems = [
            replace(p, path=shown.masked(p.path), message=shown.masked(p.message), fix=shown.masked(p.fix))
            for p in exc.problems
        ]
        raise
    except OlaresPackError as exc:
        exc.args = (shown.text(str(exc)),)
        raise
