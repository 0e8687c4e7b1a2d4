"""What `olarespack bench` reads of a llama-server: the `timings` object every completion carries (its own
decode rate, and with a drafter the tokens drafted and accepted), and the spec fields that change its speed.

The fields are those of result_timings::to_json (tools/server/server-task.cpp, b9101) and of
server_slot_stats::to_json (server-common.cpp, b11434): predicted_n, predicted_ms, predicted_per_second, and
draft_n / draft_n_accepted when the completion drafted."""

from __future__ import annotations

import math

from olarespack.engines.base import EngineBench, EngineSpec, ServerTimings

# how far the server's rate may be from what predicted_n and predicted_ms give before the timings are not believed:
# the server computes it from the same two numbers, so only rounding separates them. b9101 divides predicted_n by
# the decode time; newer builds (server_slot_stats::n_gen_tps, b11434) divide predicted_n - 1, "the first token is
# free, it comes from the logits of the last prompt batch" (vLLM bench's TPOT counts the same way). Either is the
# server's own figure, reported as it is.
RATE_TOLERANCE = 0.01


def _number(timings: dict[str, object], key: str) -> float:
    value = timings.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"timings.{key} is {str(value)[:40]}, not a number")
    return float(value)


def _count(timings: dict[str, object], key: str) -> int:
    value = _number(timings, key)
    if value < 0 or value != int(value):
        raise ValueError(f"timings.{key} is {value:g}, not a count")
    return int(value)


class LlamaCppBench(EngineBench):
    speed_fields = (
        "image",
        "command",
        "model",
        "n_gpu_layers",
        "flash_attn",
        "cache_type_k",
        "cache_type_v",
        "batch_size",
        "ubatch_size",
        "parallel",
        "threads",
        "speculative",
        "extra_args",
        "env",
    )
    served_name_field = "alias"
    counter_source = "the server's timings of each run (draft_n, draft_n_accepted)"
    max_draft_tokens = 1_024  # LlamaSpeculative.draft_max's bound

    def draft_tokens(self, engine: EngineSpec) -> int | None:
        words = ("draft", "spec", "lookup")
        if engine.command or any(word in arg for arg in engine.extra_args for word in words):
            return None  # drafting set past the typed fields
        speculative = getattr(engine, "speculative", None)
        if speculative is None:
            return 0
        # unset: llama.cpp's largest default (64 for --spec-type ngram-mod; a draft model's is 16, common.h b9101)
        return int(speculative.draft_max) if speculative.draft_max is not None else 64

    def speed_settings(self, engine: EngineSpec) -> dict[str, object]:
        settings = super().speed_settings(engine)
        model = settings.get("model")
        if isinstance(model, dict):
            # where the files are kept and under which names changes nothing of the speed
            settings["model"] = {k: v for k, v in model.items() if k in ("repo", "file", "mmproj", "revision")}
        return settings

    def timings(self, body: dict[str, object]) -> ServerTimings | None:
        found = body.get("timings")
        if found is None:
            return None
        if not isinstance(found, dict):
            raise ValueError("timings is not an object")
        if "predicted_n" not in found:
            return None  # a partial event's progress, not a completion's timing
        tokens, ms, rate = (
            _count(found, "predicted_n"),
            _number(found, "predicted_ms"),
            _number(found, "predicted_per_second"),
        )
        if tokens and (ms <= 0 or rate <= 0):
            raise ValueError(f"timings say {tokens} tokens in {ms:g} ms at {rate:g} t/s")
        if tokens and all(abs(rate - n * 1000 / ms) > RATE_TOLERANCE * rate for n in (tokens, tokens - 1)):
            raise ValueError(
                f"timings.predicted_per_second {rate:g} is neither predicted_n nor predicted_n - 1 over "
                f"predicted_ms ({tokens} in {ms:g} ms = {tokens * 1000 / ms:g} t/s)"
            )
        drafted = _count(found, "draft_n") if "draft_n" in found else None
        accepted = _count(found, "draft_n_accepted") if "draft_n_accepted" in found else None
        if drafted is not None and accepted is not None and accepted > drafted:
            raise ValueError(f"timings say {accepted} draft tokens accepted of {drafted} drafted")
        return ServerTimings(tokens, ms, rate, drafted, accepted)


BENCH = LlamaCppBench()
