"""Rules every engine shares: pinned images and extra args that would fight a typed field."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from olarespack.core.errors import Problem

if TYPE_CHECKING:
    from olarespack.engines.base import EngineSpec
    from olarespack.engines.protocol import Bound

FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "edge", "dev"})


def image_tag(image: str) -> str | None:
    """The tag of an image reference (`repo:tag`, `repo:tag@sha256:...`), None when it has none: a digest
    pins the bytes, the tag still names the engine release the rules and descriptions read."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else None


def is_gemma4(model: str) -> bool:
    return bool(re.search(r"gemma-?4", model, re.IGNORECASE))


def floating_images(file: str, engine: Bound[EngineSpec]) -> Iterator[Problem]:
    for path, image in engine.images():
        if "@sha256:" in image:
            continue
        tag = image_tag(image)
        if tag is None or tag in FLOATING_TAGS:
            example = f" (e.g. {engine.engine.pinned_image})" if path == "engine.image" else ""
            yield Problem(
                file,
                path,
                f"{image!r} has {'no tag' if tag is None else f'the floating tag {tag!r}'}; "
                "the box would run whatever the registry serves that day",
                f"pin a release tag{example} or a digest",
                rule="image-floating-tag",
            )


def typed_flags_in_extra_args(file: str, engine: Bound[EngineSpec]) -> Iterator[Problem]:
    """An extra arg repeating a flag a typed field (or the chart) sets would either be ignored or silently
    win, depending on the engine's parser."""
    from olarespack.engines.releases import image_release

    typed = engine.typed_flags()
    facts = image_release(engine.spec).facts
    for i, arg in enumerate(engine.spec.extra_args):
        flag = arg.split("=", 1)[0]
        # every spelling the image's release reads for the same option (vLLM's -sc is --speculative-config)
        option = facts.option(flag) if facts is not None and flag.startswith("-") else None
        known = next((name for name in (flag, *(option.names if option else ())) if name in typed), None)
        if known is not None:
            owner = typed[known]
            fix = "remove it: the chart sets it" if owner == "chart" else f"remove it and set {owner} instead"
            yield Problem(
                file,
                f"engine.extra_args[{i}]",
                f"{flag} duplicates a typed field" + (f" ({known})" if known != flag else ""),
                fix,
                rule="extra-arg-duplicate",
            )
