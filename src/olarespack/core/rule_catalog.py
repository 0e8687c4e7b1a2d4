"""Every rule id olarespack reports (`olarespack lint --rules`): its layer, what it protects against, and
where it comes from. The rules every engine shares are here; an engine's own are declared by its package
(engines/<kind>/catalog.py) and registered here by engines/__init__.py. A rule that mirrors Olares' own linter
names the oac function (beclab/Olares framework/oac); one olarespack adds names the failure it prevents, and is
only an error when that failure is proven (the box or the engine refuses), otherwise a warning."""

from __future__ import annotations

from collections.abc import Mapping

from olarespack.core.rule import OWN, Rule
from olarespack.core.rules_olares import OLARES_RULES

__all__ = ["OWN", "RULES", "Rule", "catalog", "known", "register"]
_SPEC = f"{OWN}: the spec"

RULES: dict[str, Rule] = {
    # spec: the file and its models (olarespack's own input)
    "yaml": Rule("spec", "the file is valid YAML, a mapping, without duplicate keys, anchors or deep nesting", _SPEC),
    "file": Rule("spec", "the spec file is a regular file of at most 1 MiB that can be read", _SPEC),
    "encoding": Rule("spec", "the spec file is UTF-8", _SPEC),
    "control-character": Rule("spec", "no control or hidden characters in spec text (newlines only in prose)", _SPEC),
    "spec-unknown-key": Rule("spec", "no unknown or misspelt keys", _SPEC),
    "spec-missing": Rule("spec", "required fields are present", _SPEC),
    "spec-type": Rule("spec", "values have the right type (a number is not quoted, a list is a list)", _SPEC),
    "spec-range": Rule("spec", "numbers are in range (utilization 0-1, startup budget over 30 minutes, ...)", _SPEC),
    "spec-format": Rule("spec", "names, titles and images match their formats (title 1-30 characters, ...)", _SPEC),
    "spec-choice": Rule("spec", "enumerated values are known (engine kind, KV cache dtype, ...)", _SPEC),
    "semver": Rule("spec", "versions are strict SemVer 2", _SPEC),
    "reserved-name": Rule(
        "spec",
        "the app name is not one Olares reserves",
        "oac chartfolder (PR titles); app-service refuses these names",
    ),
    "hardware-profile": Rule("spec", "the hardware profile exists", _SPEC),
    "template-marker": Rule(
        "spec",
        "no {{ }} anywhere; [[ ]] citations only in descriptions",
        f"{OWN}: Helm and Olares would execute {{{{ }}}} from a spec",
    ),
    "quantity": Rule("spec", "resources are Kubernetes quantities (apimachinery's grammar)", _SPEC),
    "changelog-version": Rule("spec", "the version has a changelog entry at the top", _SPEC),
    "changelog-order": Rule("spec", "the changelog is newest first, one entry per version", _SPEC),
    "changelog-date": Rule(
        "release",
        "every release has a date (its own, or its commit's)",
        "beclab/market keys the version history by mergedAt",
    ),
    "resource-limit": Rule("spec", "limits are not below requests", "Kubernetes refuses requests above limits"),
    "gpu-memory-device": Rule(
        "spec",
        "GPU memory fits the hardware profile's device (one app; under Memory "
        "Slicing the quotas of all apps on the card must add up to no more than it, which "
        "lint cannot see: `olarespack plan` checks the sum)",
        "app-service installCapacityFits: the card must hold requiredGPUMemory",
    ),
    "gpu-memory-booking": Rule(
        "spec",
        "GPU memory request and limit are equal",
        "app-service's GPU webhook sets the limit to requiredGPUMemory",
    ),
    "chart-owned-env": Rule("spec", "the spec does not set env vars the chart owns", _SPEC),
    "llm-gateway-route": Rule(
        "spec", "the app is listed in Router (LLMGatewaySupported) only with a shared entrance Router can call", _SPEC
    ),
    "pinned-model-shape": Rule(
        "spec",
        "a pinned-model app (olares.pinned_model) is what the official shape can "
        "carry: current generation, the model addressed by MODEL_NAME, its files in the "
        "shared Hugging Face cache, the wrapper's port",
        'beclab/Olares official LLM apps (llm-init wrappers: -hf/--model "$MODEL_NAME", ENGINE_ARGS word-split)',
    ),
    "pinned-model-args": Rule(
        "spec",
        "every ENGINE_ARGS word survives the wrapper's unquoted expansion (no blank "
        "or glob character; llama.cpp's drops a word with = that is not a flag)",
        "the llm-init wrappers (set -- $ENGINE_ARGS)",
    ),
    "env-loads-code": Rule(
        "spec",
        "no env that loads code or changes the interpreter or the loader (LD_PRELOAD, "
        "PYTHONPATH, PYTHONWARNINGS, BROWSER, PATH, ...): a warning; smoke never passes it",
        "ld.so(8), glibc unsecvars.h, Python's and vLLM's documented environment (core/boot_env.py)",
    ),
    "secret-in-clear": Rule(
        "spec",
        "no token or secret typed in the spec (token shapes in any field)",
        f"{OWN}: what a spec holds reaches charts, catalogs and logs",
    ),
    "entrance-title": Rule(
        "spec",
        "a title used as entrance title has no dots or brackets",
        "the linter of Olares before 1.12.6 (validateEntranceValue)",
    ),
    "locale-duplicate": Rule("spec", "translations do not repeat the default locale", _SPEC),
    "duplicate-name": Rule("spec", "two specs never render the same chart folder", _SPEC),
    "duplicate-id": Rule(
        "spec",
        "two apps never share an Olares app id (md5 of the name)",
        "beclab/market keys apps by id: one of two would vanish",
    ),
    "render": Rule("spec", "description citations parse and cite existing spec fields; no marker survives", _SPEC),
    # engine flags: what vLLM or llama.cpp refuse at boot, or run badly
    "image-floating-tag": Rule(
        "engine",
        "images are pinned (no latest, no missing tag)",
        f"{OWN}: an unpinned image runs whatever the registry serves that day",
    ),
    "extra-arg-duplicate": Rule(
        "engine", "extra args do not repeat a typed field", "the engine takes one of the two silently"
    ),
    "engine-release-option": Rule(
        "engine",
        "every option of the engine container is one the image's release "
        "accepts (the release that removed it and its replacement are named)",
        "the engine's release tables (engines/<kind>/releases/): it refuses the rest",
    ),
    "engine-release-value": Rule(
        "engine",
        "enumerated values (spec type, KV-cache dtype, speculative method, "
        "parsers, attention backend) are ones the release knows",
        "the engine's release tables; a KV-cache dtype only warns: platforms add them",
    ),
    "engine-release-deprecated": Rule(
        "engine",
        "warning: an option the release deprecates, with the release that removes it",
        "the engine's release tables",
    ),
    "engine-release-env": Rule(
        "engine",
        "the engine's own env vars (VLLM_*, LLAMA_ARG_*) are ones the release reads",
        "the engine's release tables: it ignores the rest",
    ),
    "engine-release-table": Rule(
        "engine",
        "warning: the image's release has no table of its own (the nearest "
        "older one is used; past the newest, refresh the tables)",
        "the engine's release tables",
    ),
    "image-cuda": Rule(
        "engine",
        "the image's CUDA is not newer than the driver of the oldest Olares its charts "
        "install on (a warning when the image's CUDA or that release's driver is not known)",
        "llama.cpp's docker.yml and vLLM's Dockerfile and -cuNNN tags (engines/*/releases/"
        "cuda-images.json); Olares' driver pins (data/olares-drivers.yaml); NVIDIA's prestart hook "
        "(`unsatisfied condition: cuda>=13.3`)",
    ),
    "context-fit": Rule(
        "engine",
        "the context's KV cache fits the GPU next to the weights (vLLM's arithmetic)",
        "vLLM refuses to boot (kv_cache_utils check_enough_kv_cache_memory)",
    ),
    "kv-bytes-over-booking": Rule(
        "engine",
        "a KV cache of fixed size (kv_cache_memory_bytes) and the rest of the engine's memory fit the GPU memory "
        "the app books",
        f"{OWN}: vLLM sizes the rest on top of a fixed cache and runs out of memory at start-up",
    ),
    "context-window": Rule(
        "engine",
        "the context stays within the model's positions (warning: past its trained window; for llama.cpp, a slot "
        "past the positions, which it boots and caps)",
        "vLLM refuses a max_model_len past max_position_embeddings; llama-server b9101 and b11434 cap each slot",
    ),
    "gpu-booking-unused": Rule(
        "engine",
        "an engine that allocates only what its context needs does not book most of "
        "the card (the rest stays booked and unused; `plan --write` books the share)",
        f"{OWN}: Olares refuses the next install (app-service installCapacityFits)",
    ),
    "host-memory": Rule(
        "engine",
        "the container's memory holds what the engine keeps in host memory (llama.cpp: "
        "the input embeddings and pinned compute buffers; warning: only the request is below)",
        "the pod is killed for memory at boot (cgroup OOM)",
    ),
    "model-data": Rule(
        "engine",
        "the project's models/ files are readable model files (one per repository)",
        f"{OWN}: fit and the rules read models/ before the shipped data",
    ),
    "drafter-target": Rule(
        "engine",
        "the drafter is made for the target (its drafter_for list, hidden size and vocabulary, else its family)",
        "a drafter shares the target's tokens and hidden states: vLLM refuses a mismatched pair or rejects every draft",
    ),
    "parser-family": Rule(
        "engine",
        "tool-call and reasoning parsers suit the model's family (data/families.yaml)",
        "vLLM's parsers read one family's markup: another family's tool calls come back as text",
    ),
    "parser-unknown": Rule(
        "engine",
        "warning: the parser is one vLLM registers",
        "vLLM refuses an unknown parser name at boot (unless a plugin adds it)",
    ),
    "calibration-provenance": Rule(
        "engine",
        "a calibration says what it was measured on (model, image, hardware)",
        f"{OWN}: a measurement holds only for the boot it came from",
    ),
    "calibration-stale": Rule(
        "engine",
        "a calibration was measured on the spec's model, image and hardware",
        f"{OWN}: another model, engine release or GPU uses other memory",
    ),
    "calibration-log": Rule(
        "engine", "olarespack calibrate reads a boot log of the spec's engine with its calibration lines", OWN
    ),
}
RULES.update(OLARES_RULES)  # the Olares layer, after the spec's and the engines' shared rules


_OWNED: dict[str, tuple[str, Rule]] = {}  # rule id -> (owner, rule): the rules engine packages declare


def register(owner: str, rules: Mapping[str, Rule]) -> None:
    """An engine package's own rules (`owner` names the engine): a rule id means one rule, whoever declares it."""
    for rule_id, rule in rules.items():
        other = "the shared catalog" if rule_id in RULES else _OWNED.get(rule_id, (owner, rule))[0]
        if other != owner:
            raise ValueError(f"rule {rule_id!r} of {owner} is already declared by {other}")
        _OWNED[rule_id] = (owner, rule)


def catalog() -> dict[str, Rule]:
    """Every rule id, layer by layer (in the order the shared catalog gives them), an engine's own after the shared
    ones of its layer."""
    everything = {**RULES, **{rule_id: rule for rule_id, (_, rule) in _OWNED.items()}}
    layers = list(dict.fromkeys(rule.layer for rule in everything.values()))
    return {rule_id: rule for layer in layers for rule_id, rule in everything.items() if rule.layer == layer}


def known(rule_id: str) -> bool:
    return rule_id in RULES or rule_id in _OWNED
