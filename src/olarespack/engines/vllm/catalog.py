"""The rule ids vLLM's own checks report (registered into core/rule_catalog.py by engines/__init__.py):
what each protects against and where it comes from."""

from __future__ import annotations

from olarespack.core.rule_catalog import Rule

RULES: dict[str, Rule] = {
    "vllm-engine-config": Rule(
        "engine",
        "`lint --engine-config`: the image's vLLM release accepts the pod's command line in its parser, its serve "
        "checks and create_engine_config (its own code, on a stand-in CUDA platform at the box's capability)",
        "vLLM refuses to start with the same message",
    ),
    "vllm-engine-config-unjudged": Rule(
        "engine",
        "warning: `lint --engine-config` could not judge the chart (no judge for its release here, no stand-in "
        "model, options left out for this machine's safety)",
        "tools/engine_releases/vllm_judge.py",
    ),
    "vllm-extensible-kv-cache": Rule(
        "engine",
        "vLLM 0.34 or later has its KV cache size fixed (kv_cache_memory_bytes): its extensible cache's CUDA "
        "virtual memory calls crash under HAMi, Olares' GPU sharing",
        "Project-HAMi/HAMi-core #187 (open); vllm/config/cache.py 0.34.0",
    ),
    "engine-release-conflict": Rule(
        "engine",
        "no setting given twice in two forms the release refuses together "
        "(--spec-method with --speculative-config's method)",
        "vLLM refuses to boot",
    ),
    "spec-draft-model": Rule(
        "engine", "MTP, DFlash and EAGLE name their draft model", "vLLM drafts with the target itself without one"
    ),
    "spec-method-version": Rule(
        "engine",
        "the image's vLLM knows the speculative method (gemma4_mtp >= 0.21)",
        "vLLM refuses an unknown method at boot",
    ),
    "spec-mtp-alias": Rule(
        "engine",
        "warning: an MTP alias (rendered as typed) that vLLM rewrites to mtp, logging it as deprecated",
        "vLLM SpeculativeConfig",
    ),
    "dflash-tokens": Rule("engine", "DFlash drafts at most 15 tokens", "DFlash drafters are trained with blocks of 16"),
    "tool-parser": Rule(
        "engine", "--enable-auto-tool-choice comes with a tool-call parser", "vLLM refuses to boot without one"
    ),
    "batched-tokens": Rule(
        "engine",
        "max_num_batched_tokens covers max_num_seqs (else vLLM refuses to start); below the speculative slots too, "
        "a warning (vLLM schedules fewer drafted tokens a step)",
        "vllm/config/scheduler.py SchedulerConfig.verify_max_model_len",
    ),
    "chunked-prefill": Rule(
        "engine", "chunked prefill off needs max_num_batched_tokens >= max_model_len", "vLLM refuses to boot"
    ),
    "gemma4-flash-attn": Rule("engine", "Gemma 4 does not run on FLASH_ATTN", "vLLM fails at the first request"),
    "hybrid-kv": Rule(
        "engine",
        "nothing disables the hybrid KV cache manager on sliding-window models",
        "about 11x the KV cache: the context no longer fits",
    ),
    "drafter-architecture": Rule(
        "engine",
        "an MTP drafter's config model_type is one the image's vLLM loads",
        "vLLM vllm/config/speculative.py SpeculativeConfig.hf_config_override and "
        "__post_init__: \"Unsupported speculative method: 'mtp'\"",
    ),
}
