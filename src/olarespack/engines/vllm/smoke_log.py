"""Why a vLLM boot was refused, read from its log (`olarespack smoke` and the sweep say it): a CPU model runner's
refusal, argparse's usage error, else the first raised error (the root cause, before what wraps it)."""

from __future__ import annotations

import re

# vLLM's V1 model runner (the only one without Triton, so the only one on a CPU) refuses these at config time
# (vllm/config/vllm.py _get_v1_model_runner_unsupported_features, 0.32.0)
CPU_REFUSALS = (re.compile(r"Model Runner V1 does not support: [^\n\[]*[^\n\[ ]"),)
# a traceback's last line (`ValueError: ...`, after vLLM's `(EngineCore pid=N)` prefix), else a logged error
# (pydantic's is module-qualified: `pydantic_core._pydantic_core.ValidationError: 1 validation error for ...`)
RAISED = re.compile(
    r"^(?:\(\w+ pid=\d+\) )?(?:ERROR [\d-]+ [\d:]+ \[[^\]]*\] )?(?:[A-Za-z_][\w.]*\.)?(\w*(?:Error|Exception): .*)$",
    re.MULTILINE,
)
# a pydantic ValidationError names its cause on the lines under it: `  Value error, <why> [type=value_error, ...`
VALIDATION_CAUSE = re.compile(r"^\s+(?:(?:Value|Assertion) error, )?(.+?)(?: \[type=[^\]]*\])?$", re.MULTILINE)
ERROR_LINE = re.compile(r"^.*\bERROR\b.*$", re.MULTILINE)
USAGE_ERROR = re.compile(r"^\S+: error: .*$", re.MULTILINE)  # argparse's: the command line itself was refused
WRAPPERS = re.compile(r"initialization failed|Worker failed with error|See root cause")


def boot_refusal(log: str) -> str | None:
    for pattern in CPU_REFUSALS:
        if match := pattern.search(log):
            return match.group(0)
    if usage := USAGE_ERROR.search(log):
        return usage.group(0)[:500]
    raised = [match for match in RAISED.finditer(log) if not WRAPPERS.search(match.group(1))]
    found = raised or list(RAISED.finditer(log))
    if found:  # the first: the root cause, before what wraps it
        first = found[0]
        line = first.group(1).strip()
        if line.startswith("ValidationError"):
            cause = VALIDATION_CAUSE.search(log, first.end() + 1)
            if cause and log[first.end() + 1 : cause.start()].strip() == "":
                line = f"{line}: {cause.group(1).strip()}"
        return line[:500]
    errors = ERROR_LINE.findall(log)
    return errors[0].strip()[:500] if errors else None
