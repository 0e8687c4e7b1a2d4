# mypy: ignore-errors
"""vLLM's own config code judging command lines for one release, without a GPU: run by a judge venv's python
(tools/engine_releases/vllm_judge.py makes one per release: the release wheel's Python sources first on the path,
a transformers of its time, CPU torch); olarespack never imports it.

stdin: {"capability": [major, minor], "devices": the box's GPUs, "cases": {key: [the arguments of `vllm
serve`, the model first]}}. Each command line goes through what `vllm serve` runs before it touches a GPU: the
release's own parser (the vllm CLI with its serve subcommand), the serve subcommand's validation,
EngineArgs.from_cli_args and create_engine_config, which builds and validates every config (model, cache,
scheduler, multimodal, speculative, parallel, the whole) from the local model folders named in the arguments.
The platform is a stand-in CUDA one at the box's compute capability and GPU count that loads no driver; the
flash-attention kernels the wheel compiles are not here, so their module answers "not supported" to whatever
asks.

Writes to the file named by argv[1], for each key: {"stage": "ok" | "parser" | "serve" | "engine_args" |
"engine_config" | "absent" (it asked for a compiled kernel or a package the judge has not: no verdict),
"error": what vLLM raised or printed, "cause": the "Value error, ..." line of a pydantic ValidationError,
"warnings": what vLLM logged as warnings}.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import types

# what vLLM says when its config code asks for what a judge has not (a compiled kernel; a package such as ray that
# only some set-ups install; a Hugging Face repository other than the model's and the draft's, which are local
# folders: the judge runs offline): no verdict of vLLM's
ABSENT_MARKS = (
    "_OpNamespace",
    "vllm._C",
    "vllm_flash_attn",
    "_moe_C",
    "Torch not compiled with CUDA",
    "No module named",
    "LocalEntryNotFoundError",
    "outgoing traffic has been disabled",
    "Invalid repository ID or local directory specified",
    "OfflineModeIsEnabled",
)


def _kernels_absent() -> None:
    """vllm.vllm_flash_attn raises at import without its compiled kernels; the config code only asks it
    what is supported (everything: no)."""

    def unsupported(*args, **kwargs):
        return False

    def attribute(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return unsupported

    module = types.ModuleType("vllm.vllm_flash_attn")
    module.__path__ = []
    module.__getattr__ = attribute
    sys.modules["vllm.vllm_flash_attn"] = module


def _stand_in_platform(capability, devices):
    import vllm.platforms as platforms
    from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

    major, minor = capability

    class StandInCudaPlatform(Platform):
        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        dist_backend = "nccl"

        @classmethod
        def get_device_capability(cls, device_id=0):
            return DeviceCapability(major, minor)

        @classmethod
        def device_count(cls):
            return devices

    platforms.current_platform = StandInCudaPlatform()


def _no_model_info_cache() -> None:
    """vLLM saves a model class's inspection in its cache through the weight loader, whose imports ask the
    compiled kernels what they support at import time; the inspection itself runs in a child process."""
    import vllm.model_executor.models.registry as registry

    registry._LazyRegisteredModel._save_modelinfo_to_cache = lambda *args, **kwargs: None


def _serve_parser():
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    command = serve.ServeSubcommand()
    command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
    return parser, command


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.said = []

    def emit(self, record):
        self.said.append(record.getMessage()[:600])


def _cause(exc) -> str:
    """A pydantic ValidationError's own lines: "Value error, ..." says why; the rest is pydantic's."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line.startswith(("Value error, ", "Assertion failed, ")):
            return line.split(" [type=", 1)[0]
    return ""


def _parser_said(text):
    """argparse's `error:` line; a value argparse handed to pydantic says why in the lines of its error."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    error = next((line for line in reversed(lines) if ": error: " in line), "")
    why = [line for line in lines if line.startswith(("Value error, ", "Input should be", "Unexpected keyword"))]
    field = next((lines[i - 1] for i, line in enumerate(lines) if line in why[:1] and i), "")
    cause = f"{field}: {why[0]}".split(" [type=", 1)[0] if why else ""
    return {"error": (error or " ".join(lines[-6:]) or "exited")[:4000], "cause": cause}


def judge(parser, command, argv):
    from vllm.engine.arg_utils import AsyncEngineArgs

    heard = _Warnings()
    logging.getLogger("vllm").addHandler(heard)
    said = io.StringIO()
    stage = "parser"
    try:
        with contextlib.redirect_stderr(said):
            args = parser.parse_args(["serve", *argv])
            stage = "serve"
            command.validate(args)
        if getattr(args, "model_tag", None) is not None:  # as ServeSubcommand.cmd does
            args.model = args.model_tag
        stage = "engine_args"
        engine_args = AsyncEngineArgs.from_cli_args(args)
        stage = "engine_config"
        engine_args.create_engine_config()
        return {"stage": "ok", "error": "", "cause": "", "warnings": heard.said}
    except SystemExit:
        return {"stage": stage, **_parser_said(said.getvalue()), "warnings": heard.said}
    except Exception as exc:  # what vLLM raises is the verdict, recorded as it said it
        return {
            "stage": "absent" if any(mark in str(exc) for mark in ABSENT_MARKS) else stage,
            "error": f"{type(exc).__name__}: {exc}"[:4000],
            "cause": _cause(exc),
            "warnings": heard.said,
        }
    finally:
        logging.getLogger("vllm").removeHandler(heard)


def main(answer_path: str) -> int:
    request = json.load(sys.stdin)
    sys.argv = ["vllm"]  # serve's modules read the real argv at import
    _kernels_absent()
    _stand_in_platform(request["capability"], request["devices"])
    _no_model_info_cache()
    parser, command = _serve_parser()
    answers = {key: judge(parser, command, argv) for key, argv in request["cases"].items()}
    with open(answer_path, "w", encoding="utf-8") as out:
        json.dump(answers, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
