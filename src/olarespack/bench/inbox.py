"""The same bench run next to the pod, inside the box, and its log read back here.

A box's app is reached from outside through Olares' Envoy sidecar (authentication, a proxy in the path), which
is not what a speed figure should include; the seed posts ran their harness inside the pod with `kubectl exec`.
olarespack is not in the app's image, and a Job from a Python image would need PyPI at run time, which a box
need not reach. So the requests are plain curl, in a POSIX shell loop, and the figures are computed here from
their log: `kubectl exec` runs the loop in the engine's container against 127.0.0.1 (past Envoy for certain,
the seed's way; the engine images carry curl and sh), or a Job runs it from a pinned curl image against the
app's Service, from inside the cluster. Either prints the same log, which `olarespack bench run APP --responses
LOG` reads into the same figures (and --record), by the same rules as a live bench.

The requests are not streamed (curl cannot time single events): a run's rate is the server's own timing where
the engine gives one (llama.cpp), else completion tokens over the whole request (vLLM: prompt processing
included, a little below the streamed decode rate)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

import yaml

from olarespack.bench.run import Result, Settings, drafts_between, measure, one_definition, summed_drafts
from olarespack.core import boundedjson
from olarespack.core.text import printable
from olarespack.engines.base import DraftCounts, EngineBench, TruncatedMetrics
from olarespack.engines.client import BenchError, Limits, reply_of

CURL_IMAGE = "curlimages/curl:8.11.1"  # a pinned tag: what a box runs should not change under it
CURL_USER = 100  # the image's own non-root user
MARK = "### "
HEADER = "olarespack-bench"
MAX_LOG = 64 << 20

# The loop: a header with the method, the GPU mode the container was given, the engine's counters before and
# after the measured runs (when it has them), each response followed by curl's own timing of it, and an end line
# that says the loop finished.
# Olares' HAMi gives a GPU container CUDA_DEVICE_GPU_MODE_<i>, the share mode of its card (beclab/HAMi
# pkg/device-plugin server.go; app-service pkg/compute store.go: 0 exclusive, 1 memory slicing, 2 time slicing);
# a Job's curl container has no GPU, so its log says none.
GPU_MODES = {"0": "exclusive", "1": "memory-slicing", "2": "time-slicing"}
SCRIPT = """set -u
printf '### olarespack-bench %s\\n' "$BENCH_HEADER"
printf '### gpu-mode %s\\n' "${CUDA_DEVICE_GPU_MODE_0:-}"
metrics() {
  if [ -n "$BENCH_METRICS" ]; then
    printf '### metrics %s\\n' "$1"
    curl -sS --max-time 60 "$BENCH_URL$BENCH_METRICS"
    printf '\\n'
  fi
}
i=0
while [ "$i" -lt "$BENCH_TOTAL" ]; do
  i=$((i + 1))
  if [ "$i" -eq $((BENCH_WARMUPS + 1)) ]; then metrics before; fi
  printf '### response %s\\n' "$i"
  curl -sS --max-time "$BENCH_RUN_S" -H 'Content-Type: application/json' --data-binary "$BENCH_REQUEST" \\
    -w '\\n### seconds %{time_total}\\n' "$BENCH_URL/v1/chat/completions"
done
metrics after
printf '### end\\n'
"""


def _env(url: str, settings: Settings, engine: EngineBench, limits: Limits) -> dict[str, str]:
    body = replace(settings, stream=False).body()
    header = {
        "model": settings.model,
        "prompt": settings.prompt_name,
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "warmups": settings.warmups,
        "runs": settings.runs,
    }
    return {
        "BENCH_URL": url,
        "BENCH_METRICS": engine.metrics_path or "",
        "BENCH_TOTAL": str(settings.warmups + settings.runs),
        "BENCH_WARMUPS": str(settings.warmups),
        "BENCH_RUN_S": f"{limits.run_s:g}",
        "BENCH_HEADER": json.dumps(header, separators=(",", ":")),
        "BENCH_REQUEST": json.dumps(body, separators=(",", ":"), ensure_ascii=False),
    }


def exec_argv(
    app: str, namespace: str, container: str, port: int, settings: Settings, engine: EngineBench, limits: Limits
) -> list[str]:
    """The `kubectl exec` command that runs the loop (its last item) in the engine's container, against the server
    on loopback."""
    env = _env(f"http://127.0.0.1:{port}", settings, engine, limits)
    return [
        "kubectl",
        "exec",
        "-n",
        namespace,
        f"deploy/{app}",
        "-c",
        container,
        "--",
        "env",
        *(f"{k}={v}" for k, v in env.items()),
        "sh",
        "-c",
        SCRIPT,
    ]


def exec_command(
    app: str, namespace: str, container: str, port: int, settings: Settings, engine: EngineBench, limits: Limits
) -> str:
    """The `kubectl exec` line, its log written to bench.log."""
    argv = exec_argv(app, namespace, container, port, settings, engine, limits)
    return " ".join(shlex.quote(item) for item in argv) + " > bench.log"


def job(app: str, namespace: str, port: int, settings: Settings, engine: EngineBench, limits: Limits) -> dict[str, Any]:
    """A Job in the app's namespace that runs the loop from a pinned curl image against the app's Service."""
    env = _env(f"http://{app}:{port}", settings, engine, limits)
    total = settings.warmups + settings.runs
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{app}-bench",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "olarespack", "app.kubernetes.io/component": "bench"},
        },
        "spec": {
            "backoffLimit": 0,  # a failed bench is read, not retried into a second set of runs
            "activeDeadlineSeconds": int(total * limits.run_s + 300),
            "ttlSecondsAfterFinished": 86_400,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": CURL_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "bench",
                            "image": CURL_IMAGE,
                            "command": ["sh", "-c", SCRIPT],
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "32Mi"},
                                "limits": {"cpu": "500m", "memory": "128Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                }
            },
        },
    }


class _Literal(yaml.SafeDumper):
    """Multi-line strings (the script) as literal blocks, so the printed Job reads like the script it runs."""


_Literal.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def job_yaml(document: dict[str, Any]) -> str:
    return yaml.dump(document, Dumper=_Literal, sort_keys=False, width=120, allow_unicode=True)


# ------------------------------------------------------------------------------------------ the log


def _sections(text: str, where: str) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):  # not splitlines: U+2028 and friends may sit inside a JSON answer
        if line.startswith(MARK):
            found.append((line[len(MARK) :].strip(), []))
        elif found:
            found[-1][1].append(line)
    if not found or not found[0][0].startswith(HEADER + " "):
        raise BenchError(
            f"{where}: not a bench log (it starts with no `### {HEADER}` line): give the output of "
            "the Job or the kubectl exec line that `olarespack bench box --job/--exec` prints"
        )
    return found


def _header(line: str, where: str) -> Settings:
    try:
        header = boundedjson.loads(line[len(HEADER) :])
        settings = Settings(
            model=str(header["model"]),
            prompt="",
            prompt_name=str(header["prompt"]),
            max_tokens=int(header["max_tokens"]),
            temperature=float(header["temperature"]),
            top_p=float(header["top_p"]),
            warmups=int(header["warmups"]),
            runs=int(header["runs"]),
            stream=False,
        )
    except (KeyError, TypeError, ValueError):
        raise BenchError(
            f"{where}: the `### {HEADER}` line does not say the method (model, prompt, max_tokens, ...)"
        ) from None
    if not (0 < settings.max_tokens <= 1_000_000 and 0 <= settings.warmups <= 100 and 0 < settings.runs <= 1_000):
        raise BenchError(f"{where}: the `### {HEADER}` line asks for an impossible bench")
    return settings


def _gpu_mode(sections: list[tuple[str, list[str]]], given: str | None, where: str) -> str | None:
    """The GPU mode the pod's container was given (its log's `### gpu-mode` line), checked against --gpu-mode."""
    logged = next((title.partition(" ")[2].strip() for title, _ in sections if title.startswith("gpu-mode")), "")
    if logged and logged not in GPU_MODES:
        raise BenchError(f"{where}: `### gpu-mode {logged[:20]}` is not a share mode Olares gives (0, 1 or 2)")
    found = GPU_MODES.get(logged)
    if found and given and found != given:
        raise BenchError(
            f"{where}: the pod ran with its GPU in {found} mode (CUDA_DEVICE_GPU_MODE_0={logged}), "
            f"not {given} as --gpu-mode says: leave --gpu-mode out, the log says it"
        )
    return found or given


def read_log(text: str, name: str, engine: EngineBench, gpu_mode: str | None = None) -> Result:
    """A log of the in-box loop as a bench Result, by the rules of a live bench (run.measure); its GPU mode the
    pod's where the log says it, else `gpu_mode` (--gpu-mode)."""
    sections = _sections(text, name)
    settings = replace(_header(sections[0][0], name), gpu_mode=_gpu_mode(sections, gpu_mode, name))
    total = settings.warmups + settings.runs
    if sections[-1][0] != "end":
        raise BenchError(
            f"{name}: the log has no `### end` line: the loop did not finish (see the Job's events, or "
            "the exec's errors)"
        )
    metrics: dict[str, str] = {}
    runs = []
    for index, (title, lines) in enumerate(sections[1:-1], 1):
        kind, _, arg = title.partition(" ")
        if kind == "metrics" and arg in ("before", "after"):
            metrics[arg] = "\n".join(lines)
        elif kind == "response" and arg.isdigit() and index + 1 < len(sections) - 1:
            seconds_title = sections[index + 1][0]
            runs.append(_run(int(arg), "\n".join(lines), seconds_title, settings, engine, f"{name}: response {arg}"))
    if [run_number for run_number, _ in runs] != list(range(1, total + 1)):
        raise BenchError(
            f"{name}: {len(runs)} timed response(s), numbered {[n for n, _ in runs][:12]}, for the "
            f"{total} requests the header announces"
        )
    measured = [run for _, run in runs]
    one_definition(measured, name)
    warmups, kept = measured[: settings.warmups], measured[settings.warmups :]
    counts: DraftCounts | None
    notes: list[str] = []
    if engine.metrics_path:
        try:
            before, after = (_counts(engine, metrics.get(when), name) for when in ("before", "after"))
            counts = drafts_between(before, after, name)
        except TruncatedMetrics as exc:
            counts = None
            notes.append(
                f"the log's {engine.metrics_path}: {exc}, read only in part: no speculative acceptance (a "
                "sum of part of the counters is not the acceptance)"
            )
        if counts is None and not notes:
            notes.append(f"no drafting counters at {engine.metrics_path} in the log")
    else:
        counts = summed_drafts(kept)
    return Result(name, settings, kept, warmups, counts, engine.counter_source if counts else "", notes)


def _run(
    number: int, body: str, seconds_title: str, settings: Settings, engine: EngineBench, where: str
) -> tuple[int, Any]:
    kind, _, value = seconds_title.partition(" ")
    try:
        seconds = float(value) if kind == "seconds" else -1.0
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise BenchError(f"{where}: not followed by curl's `### seconds` line")
    try:
        answer = boundedjson.loads(body)
    except ValueError as exc:
        shown = f"({exc})" if isinstance(exc, boundedjson.JsonLimitError) else repr(printable(body.strip()[:200]))
        raise BenchError(f"{where}: not a JSON answer: {shown}") from None
    warmup = number <= settings.warmups
    reply = reply_of(answer, settings.max_tokens, where, seconds)
    index = number if warmup else number - settings.warmups
    return number, measure(reply, engine, index, warmup, where.rsplit(": ", 1)[0])


def _counts(engine: EngineBench, text: str | None, where: str) -> DraftCounts | None:
    if text is None:
        return None
    try:
        return engine.draft_counts(text)
    except TruncatedMetrics:
        raise
    except ValueError as exc:
        raise BenchError(f"{where}: impossible drafting counters: {exc}") from None
