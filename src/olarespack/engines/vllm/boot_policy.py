"""What vLLM's own documentation says of its options, for a boot of a stranger's chart on this machine
(engines/confine.py judges the chart with it): the options that make vLLM import Python, read a file of further
arguments, let a request read local files, or reach other hosts. Every other option is judged by its value: a word
that names a file or folder outside the boot's folder is refused whatever the option."""

from __future__ import annotations

from olarespack.engines.confine import FlagPolicy
from olarespack.engines.vllm.release_rules import normalize

SOURCE = "vLLM docs, `vllm serve` arguments (vllm/entrypoints/openai/cli_args.py, vllm/engine/arg_utils.py)"
_IMPORTS = "vLLM imports the Python it names"
REFUSED_OPTIONS = {
    "--config": "a YAML file of further arguments, read when the command line is parsed",
    "--middleware": f"an ASGI middleware by import path: {_IMPORTS}",
    "--tool-parser-plugin": f"a Python file registering tool parsers: {_IMPORTS}",
    "--reasoning-parser-plugin": f"a Python file registering reasoning parsers: {_IMPORTS}",
    "--logits-processors": f"logits processors by qualified class name: {_IMPORTS}",
    "--worker-cls": f"the worker class by qualified name: {_IMPORTS}",
    "--worker-extension-cls": f"a worker extension class by qualified name: {_IMPORTS}",
    "--kv-transfer-config": f"a KV connector (kv_connector_module_path: {_IMPORTS}) and the hosts it talks to",
    "--ec-transfer-config": f"an encoder-cache connector ({_IMPORTS}) and the hosts it talks to",
    "--log-config-file": "a logging configuration for logging.config.dictConfig, whose '()' keys call any "
    "importable function",
    "--logging-config": "a logging configuration for logging.config.dictConfig, whose '()' keys call any "
    "importable function",
    "--allowed-local-media-path": "lets a request read files of this machine through file:// media URLs",
    "--otlp-traces-endpoint": "sends traces to another host",
    "--kv-events-config": "publishes KV cache events on a network socket",
    "--data-parallel-address": "binds or reaches another host for data parallelism",
    "-dpa": "binds or reaches another host for data parallelism",
    "--uds": "listens on a Unix socket file it creates",
    "--ssl-keyfile": "a key file of this machine",
    "--ssl-certfile": "a certificate file of this machine",
    "--ssl-ca-certs": "a certificate file of this machine",
}


def flag_policy() -> FlagPolicy:
    return FlagPolicy(SOURCE, REFUSED_OPTIONS, normalize=normalize)
