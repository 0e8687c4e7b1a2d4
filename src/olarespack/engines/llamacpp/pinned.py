"""llama.cpp in the pinned-model shape (engines/pinned.py): llama-server finds the model in the shared Hugging
Face cache by `-hf <repo>:<quant>`, serves it under that name, on the port the Model Console proxies to, and
takes every other flag from ENGINE_ARGS, as the official apps' wrapper runs it."""

from __future__ import annotations

import re

from olarespack.engines.base import Arg
from olarespack.engines.llamacpp.flags import DRAFTER_FLAGS
from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.engines.pinned import (
    MODEL_NAME_CITED,
    PinnedProblem,
    PinnedRead,
    PinnedShape,
    kept_args,
    model_sources,
    quant_tag,
)

PORT = 8081  # the official wrapper's, where the Console's ENGINE_KIND=llamacpp proxy calls
# What the wrapper's exec line writes: the model, its projector (-hf fetches it beside the model), the name,
# the address and /metrics
# /metrics; the log verbosity the individual chart raises for its buffer-size lines is left at the build's own
OWNED = frozenset(
    {"--model", "--mmproj", "--alias", "--host", "--port", "--metrics", "--log-verbosity", *DRAFTER_FLAGS}
)


def pinned_shape(
    engine: LlamaCppEngine, spec_tag: str | None, args: list[Arg], owners: dict[str, str], command: list[str]
) -> PinnedShape:
    model = engine.model
    tag = spec_tag or quant_tag(model.file)
    name = f"{model.repo}:{tag}" if tag else model.repo
    sources = [f"hf://{model.repo} --include {model.file}"]
    if model.mmproj:
        sources.append(f"hf://{model.mmproj_repo or model.repo} --include {model.mmproj}")
    problems = []
    if tag is None:
        problems.append(
            PinnedProblem(
                "engine.model.file",
                f"{model.file} has no quantization tag (the part after "
                "its last dash) that `-hf <repo>:<tag>` finds it by",
                "set olares.pinned_model.tag, or drop olares.pinned_model",
            )
        )
    elif not re.search(rf"{re.escape(tag)}[.-]", model.file, re.IGNORECASE):
        # llama.cpp's find_best_model: the first model file of the repository matching <tag>[.-], any case
        problems.append(
            PinnedProblem(
                "olares.pinned_model.tag",
                f"{tag} does not find {model.file}: llama-server "
                "takes the first file whose name has the tag followed by . or -",
                f"set olares.pinned_model.tag to a part of {model.file}",
            )
        )
    if engine.alias != name:
        problems.append(
            PinnedProblem(
                "engine.alias",
                f"is {engine.alias!r}, but the wrapper serves the model as "
                f"MODEL_NAME ({name}), the name the Model Console and Router call it by",
                f"set engine.alias: {name}",
            )
        )
    if engine.port not in (None, PORT):
        problems.append(
            PinnedProblem("engine.port", f"the Model Console calls llama.cpp on {PORT}", "remove engine.port")
        )
    if model.revision != "main":
        problems.append(
            PinnedProblem(
                "engine.model.revision",
                "the Model Console downloads the main revision",
                "remove engine.model.revision, or drop olares.pinned_model",
            )
        )
    if model.folder is not None or model.saved_as:
        field = "engine.model.folder" if model.folder is not None else "engine.model.saved_as"
        problems.append(
            PinnedProblem(
                field,
                "the files are in the shared Hugging Face cache under their "
                "repository's names, not in the app's /models",
                f"remove {field}",
            )
        )
    if engine.speculative is not None and engine.speculative.drafter is not None:
        problems.append(
            PinnedProblem(
                "engine.speculative.drafter",
                "the Model Console downloads the model's files only and the wrapper names no drafter file",
                "draft with the model's built-in head (no drafter), or drop olares.pinned_model",
            )
        )
    if engine.chat_template is not None or engine.scratch:
        field = "engine.chat_template" if engine.chat_template is not None else "engine.scratch"
        problems.append(
            PinnedProblem(
                field,
                "the pinned-model pod mounts the model cache and the Console's state only",
                f"remove {field}, or drop olares.pinned_model",
            )
        )
    head = (
        *command,
        "-hf",
        MODEL_NAME_CITED,
        "--alias",
        MODEL_NAME_CITED,
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        "--metrics",
    )
    return PinnedShape(
        kind="llamacpp",
        env_prefix="LLAMACPP",
        port=PORT,
        model_name=name,
        model_source=",".join(sources),
        head=head,
        engine_args=kept_args(args, owners, OWNED, len(engine.extra_args)),
        exports_assignments=True,
        cache_read_only=True,
        problems=tuple(problems),
    )


def read_pinned(model_name: str, model_source: str, engine_args: str, command: list[str]) -> PinnedRead:
    """The official wrapper's run: `<server> -hf NAME --alias NAME --host 0.0.0.0 --port 8081 --metrics` and the
    ENGINE_ARGS words it keeps (flags and plain words; LLAMA_ARG_*=v exported, any other k=v dropped)."""
    kept, env, dropped = [], {}, []
    for word in engine_args.split():
        if not word.startswith("-") and "=" in word:
            if word.startswith("LLAMA_ARG_"):
                name, _, value = word.partition("=")
                env[name] = value
            else:
                dropped.append(word)
            continue
        kept.append(word)
    repo = model_name.split(":", 1)[0]
    sources = model_sources(model_source)
    files = {file: (source_repo, file) for source_repo, file in sources if file}
    model = next((f for r, f in sources if f and r == repo and "mmproj" not in f), None)
    projector = next((f for _, f in sources if f and "mmproj" in f), None)
    folder = f"/models/{repo.replace('/', '--')}"
    located = [
        *(["--model", f"{folder}/{model}"] if model else ["-hf", model_name]),
        *(["--mmproj", f"{folder}/{projector}"] if projector else []),
    ]
    chart_argv = [
        *command,
        "-hf",
        model_name,
        "--alias",
        model_name,
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        "--metrics",
        *kept,
    ]
    return PinnedRead(chart_argv, [*command, *located, "--alias", model_name, *kept], files, env, dropped)
