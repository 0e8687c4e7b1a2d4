"""The official pinned-model shape as one engine sees it (Olares' own LLM apps): the Model Console (beclab/llm-init)
downloads the model into the shared Hugging Face cache and writes a sentinel; a wrapper script waits for it,
then runs the engine with the model addressed by MODEL_NAME and the rest of the command line from ENGINE_ARGS,
expanded unquoted (`$ENGINE_ARGS`): every word is split on blanks and globbed by the shell.

What differs between engines (how the model is addressed, which flags the wrapper writes itself, the port the
Console proxies to) is each engine's `pinned_shape`; what they share is here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from olarespack.engines.base import Arg

CONSOLE_PORT = 8090  # the Model Console's UI and OpenAI proxy; the shared entrance's Service targets it
HF_HUB_CACHE = "/cache/hf/hub"  # appCommon/huggingface, shared by every app of this shape
MODEL_NAME_CITED = '"$MODEL_NAME"'  # how the wrapper cites it in the exec line
_SPLIT = re.compile(r"[\s*?\[]")  # what an unquoted expansion splits on or globs


@dataclass(frozen=True)
class PinnedProblem:
    field: str
    message: str
    fix: str


@dataclass(frozen=True)
class PinnedShape:
    """One spec in the pinned-model shape of its engine."""

    kind: str  # ENGINE_KIND: the Console proxies to http://<kind>:<port>, so it is the engine Service's name
    env_prefix: str  # <PREFIX>_REQUIRED_GPU_MEMORY, as the official apps name it
    port: int
    model_name: str  # MODEL_NAME
    model_source: str  # MODEL_SOURCE: what the Console downloads (hf://<repo> [--include <file>], comma-joined)
    head: tuple[str, ...]  # the wrapper's exec line before ENGINE_ARGS, MODEL_NAME cited as the shell cites it
    engine_args: tuple[tuple[str, Arg], ...]  # (spec field, arg): the command line but what the head writes
    exports_assignments: bool  # the wrapper exports LLAMA_ARG_*=v words and drops every other k=v word
    cache_read_only: bool  # the engine only reads the cache (the Console downloads every file it needs)
    problems: tuple[PinnedProblem, ...]  # what the spec says that this shape cannot carry

    def engine_args_text(self) -> str:
        """ENGINE_ARGS as the Deployment writes it ($(ENV) cited, Kubernetes expands it in env values)."""
        return " ".join(item for _, arg in self.engine_args for item in arg.container_items())

    def engine_args_effective(self) -> str:
        """ENGINE_ARGS as the wrapper receives it."""
        return " ".join(self.effective_items())

    def effective_items(self) -> list[str]:
        return [item for _, arg in self.engine_args for item in arg.effective_items()]

    def command_line(self) -> list[str]:
        """What the process runs: the head with MODEL_NAME expanded, then ENGINE_ARGS split into words."""
        return [self.model_name if item == MODEL_NAME_CITED else item for item in self.head] + self.effective_items()

    def all_problems(self) -> list[PinnedProblem]:
        return [*self.problems, *word_problems(self)]


def word_problems(shape: PinnedShape) -> list[PinnedProblem]:
    """ENGINE_ARGS words the wrapper's unquoted expansion would change: split at a blank, globbed at * ? [, or
    (llama.cpp's wrapper) dropped as an assignment that is not a flag."""
    found = []
    for field, arg in shape.engine_args:
        for item in arg.effective_items():
            if _SPLIT.search(item):
                found.append(
                    PinnedProblem(
                        field,
                        f"{item!r} would reach the engine changed: the wrapper expands "
                        "ENGINE_ARGS unquoted, which splits words at blanks and globs * ? [",
                        "write the value without blanks or * ? [ (compact JSON has none), or drop olares.pinned_model",
                    )
                )
            elif shape.exports_assignments and "=" in item and not item.startswith("-"):
                found.append(
                    PinnedProblem(
                        field,
                        f"{item!r} never reaches the engine: the wrapper drops a word "
                        "with = that is not a flag (it exports LLAMA_ARG_*=v ones)",
                        "set it through engine.env, or drop olares.pinned_model",
                    )
                )
    return found


def kept_args(
    args: list[Arg], owners: dict[str, str], owned: frozenset[str], extra: int, skip_first_positional: bool = False
) -> tuple[tuple[str, Arg], ...]:
    """The args but those the wrapper writes (`owned` flags; the model as the first positional), each with the
    spec field it comes from; the last `extra` are the spec's extra args, as given."""
    table = args[: len(args) - extra] if extra else args
    kept: list[tuple[str, Arg]] = []
    for i, arg in enumerate(table):
        if arg.flag in owned or (skip_first_positional and i == 0 and arg.flag is None):
            continue
        owner = owners.get(arg.flag or "", "engine")
        kept.append(("engine" if owner == "chart" else owner, arg))
    start = len(args) - extra
    return (*kept, *((f"engine.extra_args[{i}]", arg) for i, arg in enumerate(args[start:])))


def quant_tag(file: str) -> str | None:
    """The quantization tag llama.cpp's `-hf <repo>:<tag>` finds a GGUF file by: the last dash-separated part
    of its name (a split file's -0000N-of-0000M left out): gemma-4-E4B-it-Q4_K_M.gguf -> Q4_K_M."""
    stem = re.sub(r"-\d{5}-of-\d{5}$", "", file.removesuffix(".gguf"))
    if "-" not in stem:
        return None
    tag = stem.rsplit("-", 1)[1]
    return tag if re.fullmatch(r"[A-Za-z0-9_]+", tag) else None


@dataclass(frozen=True)
class PinnedRead:
    """A pinned-model chart's server read through the shape's interface (import)."""

    chart_argv: list[str]  # what its wrapper runs: the head, MODEL_NAME put in, then the ENGINE_ARGS words it keeps
    argv: list[str]  # the same server in the individual shape, for the engine's import to read into a spec
    files: dict[str, tuple[str, str]]  # local file name -> (repository, file) of what the Console downloads
    env: dict[str, str]  # what the wrapper exports from ENGINE_ARGS (llama.cpp's LLAMA_ARG_*=v words)
    dropped: list[str]  # ENGINE_ARGS words the wrapper drops


def model_sources(text: str) -> list[tuple[str, str | None]]:
    """MODEL_SOURCE's entries: `hf://<repo> [--include <file>]`, comma-separated -> (repo, file or None)."""
    found = []
    for part in text.split(","):
        words = part.split()
        if not words or not words[0].startswith("hf://"):
            continue
        include = words[words.index("--include") + 1] if "--include" in words[:-1] else None
        found.append((words[0].removeprefix("hf://").rstrip("/"), include))
    return found
