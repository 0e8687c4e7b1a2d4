"""llama-server's command line read back into its engine block (import): the flag table's fields, the
model, projector and drafter files as repository files (from the download URLs the chart carries), the chat
template the chart writes into the pod, every other flag in extra_args."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from olarespack.engines.base import MODEL_DIR
from olarespack.engines.images import family_of
from olarespack.engines.importing import (
    EngineImport,
    RemoteFile,
    chart_option,
    extra_items,
    flag_spellings,
    parse_options,
    set_field,
    switch_value,
    unset_defaults,
)
from olarespack.engines.llamacpp.flags import COMMAND, DRAFT_BOUNDS, DRAFTER_FLAGS, FLAGS
from olarespack.engines.llamacpp.spec import PORT, LlamaCppEngine

_BUILD_TAG = re.compile(r"[:-]b[0-9]{4,6}$")  # an image tag naming its llama.cpp build, which a table reads


def import_llamacpp(
    argv: list[str], image: str, files: Mapping[str, RemoteFile], texts: Mapping[str, str] | None = None
) -> EngineImport:
    """llama-server's command line read back into a llama.cpp engine block. `files`: local file name -> the
    repository file it was downloaded from; `texts`: file name -> content of the files the chart writes into
    the pod itself (a chat template)."""
    result = EngineImport("llamacpp", {"kind": "llamacpp", "image": image})
    data = result.data
    family = family_of("llamacpp", image)
    default_command = list(family.command) if family else [COMMAND]
    if argv[:1] != default_command:
        data["command"] = argv[:1]
    flags = flag_spellings(FLAGS)
    folders: dict[str, str] = {}
    model: dict[str, Any] = {}
    saved_as: dict[str, str] = {}

    def file_of(role: str, path: str) -> RemoteFile | None:
        folders[role] = posixpath.dirname(path) or "."
        local = posixpath.basename(path)
        remote = files.get(local)
        if remote is None:
            result.unexpressed.append(
                f"{role} {path}: no download URL for it in the chart, so the repository it comes from is unknown"
            )
            return None
        if "/" in remote.path:
            result.unexpressed.append(
                f"{role} {path}: {remote.path} sits in a folder of {remote.repo}; the spec "
                "names files at a repository's top"
            )
        if posixpath.basename(remote.path) != local:
            saved_as[posixpath.basename(remote.path)] = local
        return remote

    extra: list[str] = []
    options = parse_options(argv[1:], flags, LlamaCppEngine)
    if not any(flag is not None and flag.owner == "engine.ctx_size" for _, _, flag in options):
        # llama-server's own default, 0: the context the model was trained with; the spec leaves it unwritten too
        data["ctx_size"] = None
        result.notes.append(
            "--ctx-size: not given, so llama-server takes the context the model was trained with; "
            "the spec's ctx_size is null, which writes none either"
        )
    unset_defaults(result, options, FLAGS, LlamaCppEngine)
    # the flags naming a drafter file: llama.cpp's, and those the image's family names for its spec types
    drafter_flags = set(DRAFTER_FLAGS) | {
        t.drafter_flag for t in (family.spec_types.values() if family else ()) if t.drafter_flag
    }
    for spelling, value, flag in options:
        if spelling in drafter_flags:
            remote = file_of("drafter", value or "")
            speculative = data.setdefault("speculative", {})
            if remote:
                speculative["drafter"] = {
                    "repo": remote.repo,
                    "file": posixpath.basename(remote.path),
                    "revision": remote.revision,
                }
            if family and spelling not in ("--model-draft", "-md"):
                names = [n for n, t in family.spec_types.items() if t.drafter_flag == spelling]
                if names:
                    speculative.setdefault("type", names[0])
            continue
        if flag is None:
            extra += extra_items(spelling, value)
            continue
        if spelling in DRAFT_BOUNDS.values() and not _BUILD_TAG.search(image):
            # a build no table reads: its chart's spelling is the one it knows (build_facts decides otherwise)
            data.setdefault("speculative", {})["bound_flags"] = "spec-draft-n"
        if flag.owner == "chart":
            chart_option(result, spelling, value, PORT)
            continue
        if flag.owner == "engine.model":
            remote = file_of("model", value or "")
            if remote:
                model.update(repo=remote.repo, file=posixpath.basename(remote.path), revision=remote.revision)
            continue
        if flag.owner == "engine.chat_template":
            text = (texts or {}).get(posixpath.basename(value or ""))
            if text is None:
                result.unexpressed.append(
                    f"{spelling} {value}: the chart writes it into the pod from nothing "
                    "olarespack can read (not a chart file, not a base64 value)"
                )
                extra += extra_items(spelling, value)
            else:
                data["chat_template"] = {"path": value, "text": text}
            continue
        if flag.owner == "engine.model.mmproj":
            remote = file_of("projector", value or "")
            if remote:
                model["mmproj"] = posixpath.basename(remote.path)
                if model.get("repo") not in (None, remote.repo):
                    model["mmproj_repo"] = remote.repo
                    if remote.revision != "main":
                        result.unexpressed.append(
                            f"projector {value}: revision {remote.revision} of another "
                            "repository (the spec takes its main)"
                        )
            continue
        set_field(data, flag.owner, switch_value(spelling, flag, value))
    speculative = data.get("speculative")
    if (
        speculative
        and "type" in speculative
        and speculative.get("drafter")
        and "model" in folders
        and folders.get("drafter") != folders["model"]
    ):
        result.unexpressed.append(
            f"drafter in {folders['drafter']}, model in {folders['model']}: the spec keeps them in one folder"
        )
    if {folders.get("model"), folders.get("projector", folders.get("model"))} != {folders.get("model")}:
        result.unexpressed.append("the projector and the model sit in different folders")
    if "model" in folders and folders["model"] != f"{MODEL_DIR}/{str(model.get('repo', '')).replace('/', '--')}":
        model["folder"] = folders["model"]  # the default folder needs no word
    if saved_as:
        model["saved_as"] = saved_as
    if model.get("revision") == "main":
        model.pop("revision")
    data["model"] = model
    if extra:
        data["extra_args"] = extra
    return result
