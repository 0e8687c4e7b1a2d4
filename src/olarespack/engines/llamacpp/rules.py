"""What llama-server would refuse at boot or run badly, found from the spec: batch sizes, a quantized V
cache without flash attention, what the image's family knows (cache and speculative types), where the chat
template is mounted, the drafter, the calibration, Gemma 4's projector, the GGUF files' fit (llamacpp.files)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olarespack.core.errors import ModelDataError, Problem
from olarespack.engines.calibration import calibration_problems
from olarespack.engines.common import is_gemma4
from olarespack.engines.consistency import drafter_problems
from olarespack.engines.images import ImageFamily, family_of
from olarespack.engines.llamacpp.files import file_problems
from olarespack.engines.llamacpp.flags import KIND, spec_type, spec_type_names
from olarespack.engines.llamacpp.semver import image_build, semver_build, tag_release
from olarespack.engines.llamacpp.spec import FULL_PRECISION_CACHE, LlamaCppEngine, downloaded_files, gguf_path
from olarespack.engines.releases import image_release, tables
from olarespack.models.arch import ModelInfo
from olarespack.models.registry import models_for


def rules(file: str, engine: LlamaCppEngine, hardware: str) -> Iterator[Problem]:
    """What llama-server would refuse at boot or run badly, found from the spec."""
    if engine.ubatch_size and engine.batch_size and engine.ubatch_size > engine.batch_size:
        # llama_context caps n_ubatch at n_batch and boots: a warning (the chart runs, the figure is not used)
        yield Problem(
            file,
            "engine.ubatch_size",
            f"{engine.ubatch_size} > batch_size {engine.batch_size}: llama.cpp caps it at {engine.batch_size}",
            f"use at most {engine.batch_size}",
            rule="ubatch-batch",
            severity="warning",
        )
    if engine.cache_type_v and engine.cache_type_v not in FULL_PRECISION_CACHE and engine.flash_attn != "on":
        # auto (also llama-server's default, when not written) turns flash attention on where the GPU has it
        # (every CUDA GPU llama.cpp supports), and refuses the quantized V cache only where it has not
        auto = engine.flash_attn in ("auto", None)
        yield Problem(
            file,
            "engine.cache_type_v",
            f"a quantized V cache ({engine.cache_type_v}) needs flash "
            "attention" + (" (auto turns it on on CUDA GPUs)" if auto else ""),
            'set engine.flash_attn: "on"',
            rule="quantized-v-cache",
            severity="warning" if auto else "error",
        )
    yield from _family(file, engine)
    yield from _chat_template(file, engine)
    try:
        registry: dict[str, ModelInfo] = models_for(file)
    except ModelDataError:
        registry = {}  # the fit rule reports model data it cannot read
    drafter = engine.speculative.drafter if engine.speculative else None
    if drafter is not None:
        # a separate draft model has a width of its own; an MTP head reads the target's hidden states
        separate = engine.speculative is not None and engine.speculative.type in (None, "draft")
        yield from drafter_problems(
            file,
            "engine.speculative.drafter",
            engine.model.repo,
            drafter.repo,
            registry,
            hidden_states=not separate,
            vocab=not separate,
        )
    target = registry.get(engine.model.repo)
    if drafter is None and spec_type(engine) == "draft-mtp" and target and target.arch and not target.arch.nextn_layers:
        # b11434: "context type MTP requested but model doesn't contain MTP layers", and the server exits
        yield Problem(
            file,
            "engine.speculative.type",
            f"draft-mtp without a drafter file drafts with the model's own MTP layers; {target.repo}'s model data "
            "names none (num_nextn_predict_layers), and llama-server refuses to start on a model without them",
            "name an MTP drafter file (engine.speculative.drafter), or another type; model data written before "
            "olarespack read MTP layers: `olarespack model add ... --force` reads them again",
            rule="llamacpp-mtp-layers",
            severity="warning",
        )
    yield from file_problems(file, engine, registry)
    yield from calibration_problems(file, engine.model.repo, engine.image, hardware, engine.calibration)
    mmproj = engine.model.mmproj
    # the audio encoder's finding (seed post 1, Gemma 4 E4B): only the E models (E2B, E4B) take audio; a larger
    # Gemma 4's vision projector in another type works (the seed author's 12B runs Google's q4_0 one)
    if (
        mmproj
        and is_gemma4(engine.model.repo)
        and re.search(r"gemma-?4-E\d+B", engine.model.repo, re.IGNORECASE)
        and "bf16" not in mmproj.lower()
    ):
        yield Problem(
            file,
            "engine.model.mmproj",
            f"{mmproj}: Gemma 4 audio needs the BF16 projector (F16 and Q8_0 give repetitive output)",
            "use the mmproj-BF16.gguf file",
            rule="gemma4-mmproj-bf16",
        )


def _chat_template(file: str, engine: LlamaCppEngine) -> Iterator[Problem]:
    """The template is mounted over its path: never over a model file, nor inside an emptyDir folder."""
    template = engine.chat_template
    if template is None:
        return
    downloaded = {gguf_path(engine, name) for name in downloaded_files(engine)}
    inside = [folder for folder in engine.scratch if template.path.startswith(f"{folder}/")]
    if template.path in downloaded or inside:
        what = f"the scratch folder {inside[0]}" if inside else "a model file the downloader writes there"
        yield Problem(
            file,
            "engine.chat_template.path",
            f"{template.path} is {'in ' if inside else ''}{what}",
            "use a path of its own, e.g. /models/chat_template.jinja",
            rule="chat-template-path",
        )


def _family(file: str, engine: LlamaCppEngine) -> Iterator[Problem]:
    """What the image's family knows: its KV cache types and speculative types (a fork's flags)."""
    family = family_of("llamacpp", engine.image)
    if family is None:
        yield Problem(
            file,
            "engine.image",
            f"{engine.image} is no llama.cpp image family olarespack knows: its "
            "cache and speculative types are passed through unchecked",
            "fine for a custom build; set engine.command if its server is not llama-server on PATH",
            rule="llamacpp-image-family",
            severity="warning",
        )
        return
    yield from _release_tag(file, engine, family)
    types = family.all_cache_types()
    speculative = engine.speculative
    cache_fields = [("engine.cache_type_k", engine.cache_type_k), ("engine.cache_type_v", engine.cache_type_v)]
    if speculative:
        cache_fields += [
            ("engine.speculative.cache_type_k", speculative.cache_type_k),
            ("engine.speculative.cache_type_v", speculative.cache_type_v),
        ]
    for path, value in cache_fields:
        if value is not None and value not in types:
            yield Problem(
                file,
                path,
                f"{value!r} is not a KV cache type of {family.name} ({engine.image}); llama-server refuses to start",
                f"use one of {', '.join(sorted(types))}",
                rule="llamacpp-cache-type",
            )
    if speculative is None:
        return
    if speculative.type is not None:
        yield from _spec_type(file, engine, family, speculative.type)


def _release_tag(file: str, engine: LlamaCppEngine, family: ImageFamily) -> Iterator[Problem]:
    """A semantic-version tag (`server-cuda12-v0.3.0`) runs one nightly build that the tag does not name: its
    flags, KV types and CUDA are that build's, so a tag whose build the tables cannot pin is refused."""
    release = tag_release(family, engine.image)
    if release is None:
        return
    found = semver_build(release)
    if found.build is None:
        yield Problem(
            file,
            "engine.image",
            f"{engine.image} is llama.cpp release {release}, a re-tag of one nightly "
            f"build the tag does not name, and the release tables cannot say which ({found.known}), so "
            "nothing about its build can be checked",
            found.fix(engine.image),
            rule="llamacpp-release-tag",
        )


def _spec_type(file: str, engine: LlamaCppEngine, family: ImageFamily, typed: str) -> Iterator[Problem]:
    """The type the build names (its release facts), else the family's list; a fork's own types are its
    family's, whatever the build it is based on has."""
    known = next((family.spec_types[name] for name in spec_type_names(typed) if name in family.spec_types), None)
    match = image_release(engine)
    facts = match.facts
    values = facts.values("--spec-type") if facts else None
    rendered = spec_type(engine)
    # between two tables (or past the newest) a type the older table lacks may have arrived since: the
    # family's first build for it decides there
    exact = match.note is None
    if (
        facts is not None
        and values is not None
        and rendered not in values
        and not (family.based_on and known)
        and (exact or known is None)
    ):
        yield Problem(
            file,
            "engine.speculative.type",
            f"--spec-type {typed} is not a speculative type of "
            f"llama.cpp {facts.release} ({engine.image}); llama-server refuses to start",
            f"use one of {', '.join(sorted(values))}, or an image whose build has it",
            rule="llamacpp-spec-type",
        )
        return
    build = image_build(engine.image)
    if known is None and facts is None and build is None and not family.based_on:
        # a moving tag (server-cuda12) pulls the newest build at install: the newest table judges its types
        newest = tables(KIND)[-1:]
        values = newest[0].values("--spec-type") if newest else None
        if values is not None and rendered in values:
            return
    if known is None and facts is None:
        yield Problem(
            file,
            "engine.speculative.type",
            f"--spec-type {typed} is unknown to {family.name} ({engine.image})",
            f"use one of {', '.join(sorted(family.spec_types)) or 'none'}, or an image that has it",
            rule="llamacpp-spec-type",
        )
    elif known and not exact and known.min_build and build is not None and build < known.min_build:
        yield Problem(
            file,
            "engine.speculative.type",
            f"--spec-type {typed} arrived in build b{known.min_build}; the image is b{build}",
            f"use b{known.min_build} or later",
            rule="llamacpp-spec-type",
        )
    elif known and known.drafter_flag and engine.speculative and engine.speculative.drafter is None:
        yield Problem(
            file,
            "engine.speculative.drafter",
            f"--spec-type {typed} needs a drafter file ({known.drafter_flag})",
            "set engine.speculative.drafter (repo and file)",
            rule="llamacpp-spec-type",
        )
