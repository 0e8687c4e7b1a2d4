"""What vLLM loads as a drafter, by the drafter's own config (models/, written by `model add --config`): the
config `model_type` an MTP method needs, and which methods read the target's hidden states.

vLLM's SpeculativeConfig (vllm/config/speculative.py) first rewrites a drafter's config (`hf_config_override`:
`gemma4_assistant` and `gemma4_unified_assistant` become `gemma4_mtp`, `qwen3_next` becomes `qwen3_next_mtp`,
...), then, with the method mtp (or an MTP alias it rewrites to mtp), takes the drafter only when its model_type
is one of the release's `MTPModelTypes`; any other raises NotImplementedError ("Unsupported speculative method:
'mtp'") and vLLM does not start. The release's MTP types are its table's `mtp_model_types` (releases/); the
rewrites below are those hf_config_override keys by model_type (main after 0.33). Rewrites keyed by the config's
`architectures` (DeepSeek, MiMo, GLM) are not kept by `model add`: only a drafter type that names itself an MTP
or assistant model is judged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from olarespack.core.errors import Problem
from olarespack.engines.releases import image_release
from olarespack.engines.vllm.spec import MTP_ALIASES, VllmEngine
from olarespack.models.arch import ModelInfo

MTP_REWRITES = {
    "gemma4_assistant": "gemma4_mtp",
    "gemma4_unified_assistant": "gemma4_mtp",
    "ernie4_5_moe": "ernie_mtp",
    "qwen3_next": "qwen3_next_mtp",
    "exaone_moe": "exaone_moe_mtp",
    "qwen3_5": "qwen3_5_mtp",
    "qwen3_5_moe": "qwen3_5_mtp",
    "qwen3_5_text": "qwen3_5_mtp",
    "qwen3_5_moe_text": "qwen3_5_mtp",
    "longcat_flash": "longcat_flash_mtp",
    "longcat_flash_ngram": "longcat_flash_mtp",
    "hy_v3": "hy_v3_mtp",
    "hy_v4": "hy_v4_mtp",
    "step3p5": "step3p5_mtp",
    "glm5_next": "glm5_next_mtp",
}
# methods whose drafter is a model of its own, fed tokens only: its hidden size is its own
SEPARATE_DRAFT_METHODS = frozenset({"draft_model", "ngram", "ngram_gpu", "suffix", "custom_class"})


def reads_hidden_states(engine: VllmEngine) -> bool:
    """The method feeds the target's hidden states to the drafter (MTP, EAGLE, DFlash); no method is vLLM's
    draft_model."""
    method = engine.speculative.method if engine.speculative else None
    return method is not None and method not in SEPARATE_DRAFT_METHODS


def mtp_drafter_problems(file: str, engine: VllmEngine, registry: Mapping[str, ModelInfo]) -> Iterator[Problem]:
    """An MTP method's drafter must be (or be rewritten to) one of the release's MTP model types."""
    speculative = engine.speculative
    if speculative is None or speculative.model is None or speculative.method not in MTP_ALIASES | {"mtp"}:
        return
    info = registry.get(speculative.model)
    kind = info.model_type if info else None
    facts = image_release(engine).facts
    types = facts.sets.get("mtp_aliases", frozenset()) | {"mtp"} if facts else frozenset()
    if kind is None or facts is None or MTP_REWRITES.get(kind, kind) in types:
        return
    spelled = kind.replace("-", "_")
    if not (kind in MTP_REWRITES or spelled in MTP_REWRITES or spelled.endswith(("_mtp", "_assistant"))):
        return  # vLLM may still rewrite it by its architectures, which the model facts do not keep
    hint = (
        f" ({MTP_REWRITES[spelled]} by way of {spelled}, the name vLLM reads: {kind} is another build's spelling)"
        if spelled in MTP_REWRITES and spelled != kind
        else ""
    )
    yield Problem(
        file,
        "engine.speculative.model",
        f"the drafter {speculative.model} has config model_type {kind!r}, which vLLM {facts.release} does "
        f"not load as an MTP drafter{hint}: it stops with \"Unsupported speculative method: 'mtp'\"",
        f"use a drafter checkpoint whose config.json vLLM {facts.release} reads as an MTP model "
        f"({', '.join(sorted(types - {'mtp'})[:6])}, ...), or a release that knows its type",
        rule="drafter-architecture",
    )
