"""What `olarespack bench` reads of a vLLM server: no per-request timings (tokens per second come from the
usage and the client's clock, as `vllm bench serve` does), drafting counted in its Prometheus `/metrics`, and
the spec fields that change its speed."""

from __future__ import annotations

import math
import re

from olarespack.engines.base import DraftCounts, EngineBench, EngineSpec, TruncatedMetrics

# The counters vLLM's SpecDecodingProm registers (vllm/v1/spec_decode/metrics.py, 0.20 to 0.33), as
# prometheus_client exposes a Counter: the name with `_total`, one sample per label set (model_name, engine).
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
MAX_METRICS_LINES = 100_000  # a vLLM server's /metrics has a few thousand
# `name{labels} value [timestamp]`; label values are quoted strings that may hold spaces and braces
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)(?:\s+-?\d+)?\s*$')


class VllmBench(EngineBench):
    speed_fields = (
        "image",
        "version",
        "model",
        "revision",
        "dtype",
        "kv_cache_dtype",
        "attention_backend",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "enable_chunked_prefill",
        "async_scheduling",
        "speculative",
        "command",
        "extra_args",
        "env",
    )
    metrics_path = "/metrics"
    served_name_field = "served_model_name"
    counter_source = "the server's /metrics (vllm:spec_decode_num_*_tokens_total, before and after the runs)"
    max_draft_tokens = 128  # Speculative.num_speculative_tokens' bound

    def draft_tokens(self, engine: EngineSpec) -> int | None:
        if engine.command or any("speculative" in arg for arg in engine.extra_args):
            return None  # drafting set past the typed field
        speculative = getattr(engine, "speculative", None)
        return int(speculative.num_speculative_tokens) if speculative is not None else 0

    def draft_counts(self, metrics: str) -> DraftCounts | None:
        """The draft and accepted token counters, summed over their label sets (one per engine core); None when
        the server exposes neither (it runs without speculative decoding). ValueError: a counter that cannot be
        (negative, not a number, more accepted than drafted)."""
        totals: dict[str, float] = {}
        if metrics.count("\n") >= MAX_METRICS_LINES:  # counted before the text is split into that many strings
            raise TruncatedMetrics(f"over {MAX_METRICS_LINES} lines: counters past them would be missing from the sums")
        for number, line in enumerate(metrics.splitlines(), 1):
            if not line.startswith("vllm:spec_decode_num_"):
                continue
            match = _SAMPLE.match(line)
            if match is None:
                raise ValueError(f"line {number} is not a Prometheus sample: {line[:120]!r}")
            name, value = match.group(1), match.group(3)
            if name not in (DRAFT_TOKENS, ACCEPTED_TOKENS):
                continue
            try:
                count = float(value)
            except ValueError:
                raise ValueError(f"line {number}: {name} is {value[:40]!r}, not a number") from None
            if not math.isfinite(count) or count < 0 or count != int(count):
                raise ValueError(f"line {number}: {name} is {value[:40]}, not a count")
            totals[name] = totals.get(name, 0.0) + count
        if not totals:
            return None
        counts = DraftCounts(int(totals.get(DRAFT_TOKENS, 0)), int(totals.get(ACCEPTED_TOKENS, 0)))
        if counts.accepted > counts.drafted:
            raise ValueError(f"{counts.accepted} tokens accepted of {counts.drafted} drafted")
        return counts


BENCH = VllmBench()
