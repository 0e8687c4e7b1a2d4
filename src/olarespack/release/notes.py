"""The upgrade note `bump` writes when none is given, in the words of the people who install the app: what
changed in the settings they know ("Context 128K -> 160K"), then what their box will see on upgrade. It
reads the rendered Deployment of the base and of now (helm's output, with $(VAR) values taken from the
container's env, where SPEC_CONFIG lives), so a change is told once however many files repeat it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from olarespack.fit.record import STALE_PATTERN
from olarespack.release.diff import AppDiff

POSITIONAL = "(model)"  # vLLM names its model without a flag
# The entry of an app's first version in this market; an app new at the base whose newest entry says it has
# had its first release, and a second bump leaves it alone.
FIRST_RELEASE = "First release of this app in this market."
# flag -> what people call the setting, and how its values read
LABELS: dict[str, tuple[str, str]] = {
    "--max-model-len": ("Context", "tokens"),
    "--ctx-size": ("Context", "tokens"),
    "--gpu-memory-utilization": ("GPU memory share", "share"),
    "--kv-cache-dtype": ("KV cache type", "text"),
    "--cache-type-k": ("KV cache type (keys)", "text"),
    "--cache-type-v": ("KV cache type (values)", "text"),
    "--max-num-seqs": ("Requests at once", "text"),
    "--parallel": ("Requests at once", "text"),
    "--max-num-batched-tokens": ("Tokens per step", "tokens"),
    "--batch-size": ("Batch size", "text"),
    "--ubatch-size": ("Micro-batch size", "text"),
    "--speculative-config": ("Speculative decoding", "speculative"),
    "--spec-type": ("Speculative decoding", "text"),
    "--draft-max": ("Draft tokens at most", "text"),
    "--served-model-name": ("Model name for clients", "text"),
    "--alias": ("Model name for clients", "text"),
    "--tool-call-parser": ("Tool calling", "text"),
    "--reasoning-parser": ("Reasoning parser", "text"),
    "--attention-backend": ("Attention backend", "text"),
    "--limit-mm-per-prompt": ("Media per prompt", "text"),
    "--threads": ("CPU threads", "text"),
    "--chat-template-file": ("Chat template file", "text"),
    "(model)": ("Model", "text"),
    "--model": ("Model file", "text"),
    "--mmproj": ("Projector file", "text"),
    "--model-draft": ("Drafter file", "text"),
    "--mtp-head": ("MTP head file", "text"),
}
# a spec field -> what people call it, where an engine release writes the field differently
FIELD_LABELS: dict[str, str] = {
    "engine.mlock": "memory locking",
    "engine.speculative": "speculative decoding",
    "engine.speculative.type": "the speculative type",
    "engine.speculative.draft_max": "draft tokens at most",
    "engine.flash_attn": "flash attention",
    "engine.context_shift": "context shift",
}
KEPT = "Upgrading restarts the app; the downloaded model files are kept."
MODEL_FLAGS = (POSITIONAL, "--model", "--mmproj", "--model-draft", "--mtp-head")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _tokens(value: str) -> str:
    """131072 -> 128K: contexts are powers of two people say in K; another length is said to the nearest K
    with its exact count (80224 -> 78K (80224))."""
    if value.isdigit() and int(value) >= 1024:
        if int(value) % 1024 == 0:
            return f"{int(value) // 1024}K"
        return f"{round(int(value) / 1024)}K ({value})"
    return value


def _speculative(value: str) -> str:
    try:
        config = json.loads(value)
    except json.JSONDecodeError:
        return value
    if not isinstance(config, dict):
        return value
    method = config.get("method", "?")
    tokens = config.get("num_speculative_tokens")
    drafter = str(config.get("model") or "").rsplit("/", 1)[-1]
    return f"{method}" + (f" with {drafter}" if drafter else "") + (f", {tokens} tokens" if tokens else "")


def _speculative_change(old: str, new: str) -> str:
    """Only what changed in the drafting: "3 -> 5 tokens", "drafter a -> b", "method x -> y"."""
    try:
        before, after = json.loads(old), json.loads(new)
    except json.JSONDecodeError:
        return f"{old} -> {new}"
    if not isinstance(before, dict) or not isinstance(after, dict):
        return f"{old} -> {new}"
    parts = []
    for key, name in (("method", "method"), ("model", "drafter"), ("num_speculative_tokens", "tokens")):
        if before.get(key) != after.get(key):
            was, now = before.get(key, "none"), after.get(key, "none")
            parts.append(f"{was} -> {now} tokens" if key == "num_speculative_tokens" else f"{name} {was} -> {now}")
    others = sorted(
        k
        for k in set(before) | set(after)
        if k not in ("method", "model", "num_speculative_tokens") and before.get(k) != after.get(k)
    )
    parts += [f"{k} {before.get(k, 'none')} -> {after.get(k, 'none')}" for k in others]
    return ", ".join(parts) or "unchanged"


def _shown(flag: str, value: str) -> str:
    kind = LABELS.get(flag, ("", "text"))[1]
    if kind == "tokens":
        return _tokens(value)
    if kind == "speculative":
        return _speculative(value)
    return value or "on"


def _engine(document: dict[str, Any] | None) -> tuple[str | None, dict[str, str], dict[str, Any]]:
    """The engine container's image, its options as the process gets them ($(VAR) from its env), resources."""
    if not document:
        return None, {}, {}
    containers = ((document.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    if not containers:
        return None, {}, {}
    container = containers[0]
    env = {str(e.get("name")): str(e.get("value")) for e in container.get("env") or [] if "value" in e}
    args = [_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), str(a)) for a in container.get("args") or []]
    options: dict[str, str] = {POSITIONAL: args[0]} if args and not args[0].startswith("-") else {}
    for i, arg in enumerate(args):
        if arg.startswith("-"):
            following = args[i + 1] if i + 1 < len(args) else ""
            options[arg] = "" if following.startswith("-") else following
    return container.get("image"), options, container.get("resources") or {}


def _release(image: str | None) -> str:
    """vllm/vllm-openai:v0.21.0-cu129 -> v0.21.0-cu129: the tag is what people compare."""
    return (image or "").split("@", 1)[0].rsplit(":", 1)[-1]


def upgrade_note(diff: AppDiff) -> str:
    """The default changelog entry: the settings that changed, then what a box sees when it upgrades."""
    if diff.base_version is None:
        return FIRST_RELEASE
    settings, box = box_changes(diff)
    return ". ".join(["; ".join(settings) or "No change a box would see", *box]) + "."


def box_changes(diff: AppDiff, named_only: bool = False) -> tuple[list[str], list[str]]:
    """What a box gets from the base's chart to this one, in people's words: the settings that changed
    ("Context 128K -> 78K"), then what upgrading does ("Upgrading restarts the app; ..."). `named_only`
    leaves out the flags people have no name for (an engine release writing its own flags differently)."""
    settings: list[str] = []
    told: set[str] = set()
    restarts = downloads = False
    for change in diff.changes:
        if not change.key.startswith("Deployment/"):
            continue
        restarts = True
        old_image, before, old_resources = _engine(change.old)
        new_image, after, new_resources = _engine(change.new)
        if old_image != new_image and change.change == "changed":
            settings.append(f"Engine image {_release(old_image)} -> {_release(new_image)}")
        for flag in sorted(set(before) | set(after)):
            if before.get(flag) == after.get(flag) or change.change != "changed":
                continue
            if flag in MODEL_FLAGS:
                downloads = True
            if named_only and flag not in LABELS:
                continue
            label = LABELS.get(flag, (f"`{flag}`", "text"))[0]
            if label in told:
                continue
            told.add(label)
            if flag not in after:
                settings.append(f"{label}: {_shown(flag, before[flag])} removed")
            elif flag not in before:
                settings.append(f"{label}: {_shown(flag, after[flag])}")
            elif LABELS.get(flag, ("", ""))[1] == "speculative":
                settings.append(f"{label}: {_speculative_change(before[flag], after[flag])}")
            else:
                settings.append(f"{label} {_shown(flag, before[flag])} -> {_shown(flag, after[flag])}")
        for kind in ("requests", "limits"):
            for name, title in (("memory", "Memory"), ("cpu", "CPU")):
                old = (old_resources.get(kind) or {}).get(name)
                new = (new_resources.get(kind) or {}).get(name)
                if old != new and old is not None and new is not None and f"{title} {kind}" not in told:
                    told.add(f"{title} {kind}")
                    settings.append(f"{title} {kind[:-1]} {old} -> {new}")
    texts = any(c.key.startswith(("OlaresManifest.yaml", "i18n/")) for c in diff.changes)
    if not settings and texts:
        settings.append("Description and market details updated")
    if not settings and restarts:
        settings.append("Pod settings updated")
    box = []
    if restarts:
        box.append(
            "Upgrading restarts the app"
            + (
                "; the new model files download on its first start"
                if downloads
                else "; the downloaded model files are kept"
            )
        )
    return settings, box


def release_note(
    title: str,
    old: str,
    new: str,
    before: dict[str, list[str]],
    after: dict[str, list[str]],
    seen: tuple[list[str], list[str]] | None = None,
    engine_notes: Sequence[str] = (),
) -> str:
    """The entry of a move to another engine release, for the people who install the app: what their box gets
    since the released chart (`seen`, from box_changes: "Context 128K -> 78K", "Upgrading restarts the app"),
    and each setting people know that the new release writes differently ("llama.cpp b9101 -> b11434: memory
    locking is now --load-mode mmap+mlock"). `before` and `after` map a spec field to its args; a flag no setting
    names (one the new release needs, such as b9246's --log-verbosity 4) is said as the pod will run it."""
    settings, box = seen if seen is not None else ([], [KEPT.rstrip(".")])
    changes = [line for line in settings if not line.startswith("Engine image ")]
    for field in sorted(set(before) | set(after), key=lambda f: (f not in FIELD_LABELS, f)):
        was, now = before.get(field, []), after.get(field, [])
        if was == now:
            continue
        if field not in FIELD_LABELS:  # a flag the new release needs that no setting names: said as it is
            changes.append(
                f"the server now runs with {' '.join(now)}"
                if now
                else f"the server no longer runs with {' '.join(was)}"
            )
            continue
        label = FIELD_LABELS[field]
        if len(was) == len(now) == 2 and LABELS.get(was[0], ("", ""))[1] == "speculative":
            changes.append(f"{label}: {_speculative_change(was[1], now[1])}")
        elif now:
            changes.append(f"{label} is now {' '.join(now)}")
        else:
            changes.append(f"{label}: {' '.join(was)} is no longer written")
    said = "; ".join(changes) or "no setting a box would see changes"
    told = "".join(f" {line}." for line in engine_notes)  # what the engine says the move changes, as sentences
    return f"{title} {old} -> {new}: {said}.{told} " + ". ".join(box) + "."


# a measured figure as descriptions state them: "250 t/s", "AVG 223.90 t/s", "+53%", "71 ms"
FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?\s?(?:t/s|tok/s|tokens/s|ms|%|GB/s|GiB/s)(?![\w/])")


def stale_figures(diff: AppDiff) -> list[str]:
    """Claims of the market texts a changed setting made stale. By data first: a figure cited from a bench record
    whose settings hash is no longer the spec's renders with the record's stale mark (fit/record.py), whatever
    the words around it. Then, for figures typed by hand, by matching lines: a line whose cited settings changed
    while a measured figure beside it did not ("250 t/s at 128K context" becoming "250 t/s at 160K context")."""
    found: list[str] = []
    for change in diff.changes:
        if not change.key.endswith("OlaresManifest.yaml"):
            continue
        removed = [line[1:] for line in change.diff if line.startswith("-") and not line.startswith("---")]
        added = [line[1:] for line in change.diff if line.startswith("+") and not line.startswith("+++")]
        for version in sorted({m.group(1) for line in added for m in STALE_PATTERN.finditer(line)}):
            found.append(
                f"{diff.file}: {change.key}: the bench figures measured on {version} were measured with "
                "settings that changed since (marked so in the text): re-measure them with `olarespack "
                "bench run SPEC --url URL --record`"
            )
        for old in removed:
            figures = FIGURE.findall(old)
            if not figures:
                continue
            for new in added:
                if new != old and FIGURE.findall(new) == figures and _same_words(old, new):
                    found.append(
                        f"{diff.file}: {change.key}: {', '.join(figures)} stays beside a changed setting "
                        f"({_changed_words(old, new)}): re-measure it or say what it was measured at"
                    )
                    break
    return sorted(set(found))


def _words(text: str) -> list[str]:
    return re.findall(r"[\w./%+-]+", text)


def _same_words(old: str, new: str) -> bool:
    """The same sentence with a value changed: as many words, most of them equal."""
    a, b = _words(old), _words(new)
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) <= max(2, len(a) // 5)


def _changed_words(old: str, new: str) -> str:
    pairs = [(x, y) for x, y in zip(_words(old), _words(new), strict=True) if x != y]
    return ", ".join(f"{x} -> {y}" for x, y in pairs[:3])
