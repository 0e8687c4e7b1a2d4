"""vLLM in the pinned-model shape (engines/pinned.py): the server loads the model the Model Console put in the
shared Hugging Face cache by its repository id (MODEL_NAME), serves it under that name, on the port the Console
proxies to, and takes every other flag from ENGINE_ARGS, as the official apps' wrapper runs it."""

from __future__ import annotations

from olarespack.engines.base import Arg
from olarespack.engines.pinned import MODEL_NAME_CITED, PinnedProblem, PinnedRead, PinnedShape, kept_args
from olarespack.engines.vllm.spec import VllmEngine

PORT = 8000  # where the Console's ENGINE_KIND=vllm proxy calls
# What the wrapper's exec line writes: the model (positional or --model), its name and the address; the weights
# stay in HF_HUB_CACHE, where the Console put them
OWNED = frozenset({"--model", "--served-model-name", "--host", "--port", "--download-dir"})


def pinned_shape(engine: VllmEngine, args: list[Arg], owners: dict[str, str], command: list[str]) -> PinnedShape:
    problems = []
    if engine.served_model_name != engine.model:
        problems.append(
            PinnedProblem(
                "engine.served_model_name",
                f"is {engine.served_model_name!r}, but the "
                f"wrapper serves the model as MODEL_NAME ({engine.model}), the name the Model "
                "Console and Router call it by",
                f"set engine.served_model_name: {engine.model}",
            )
        )
    if engine.port not in (None, PORT):
        problems.append(PinnedProblem("engine.port", f"the Model Console calls vLLM on {PORT}", "remove engine.port"))
    if engine.revision is not None:
        problems.append(
            PinnedProblem(
                "engine.revision",
                "the Model Console downloads the main revision",
                "remove engine.revision, or drop olares.pinned_model",
            )
        )
    model = ("--model", MODEL_NAME_CITED) if command[-1:] != ["serve"] else (MODEL_NAME_CITED,)
    head = (*command, *model, "--served-model-name", MODEL_NAME_CITED, "--host", "0.0.0.0", "--port", str(PORT))
    return PinnedShape(
        kind="vllm",
        env_prefix="VLLM",
        port=PORT,
        model_name=engine.model,
        model_source=f"hf://{engine.model}",
        head=head,
        engine_args=kept_args(args, owners, OWNED, len(engine.extra_args), skip_first_positional=True),
        exports_assignments=False,
        cache_read_only=False,
        problems=tuple(problems),
    )


def read_pinned(model_name: str, model_source: str, engine_args: str, command: list[str]) -> PinnedRead:
    """The official wrapper's run: `<server> --model NAME --served-model-name NAME --host 0.0.0.0 --port 8000` (the
    model positional after `vllm serve`) and every ENGINE_ARGS word."""
    model = ["--model", model_name] if command[-1:] != ["serve"] else [model_name]
    argv = [
        *command,
        *model,
        "--served-model-name",
        model_name,
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        *engine_args.split(),
    ]
    return PinnedRead(argv, argv, {}, {}, [])
