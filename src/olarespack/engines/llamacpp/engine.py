"""llama.cpp's llama-server (build b9101): its port, container and command, the GGUF downloader, and what
it answers for the chart, import, fit and calibrate (each in its own module of this package)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from olarespack.core.errors import Problem
from olarespack.core.rule_catalog import Rule
from olarespack.engines.base import Arg, ContainerResources, EngineBench
from olarespack.engines.bootlog import BootLog
from olarespack.engines.common import image_tag
from olarespack.engines.cuda import ImageCuda
from olarespack.engines.fit import FitReport, FitRequest
from olarespack.engines.images import family_of
from olarespack.engines.importing import EngineImport, ImportSource
from olarespack.engines.llamacpp import catalog, cuda
from olarespack.engines.llamacpp.bootlog import LlamaCppLog
from olarespack.engines.llamacpp.fit import fit as llamacpp_fit
from olarespack.engines.llamacpp.flags import COMMAND, DRAFTER_FLAGS, FLAGS, drafter_flag, log_verbosity
from olarespack.engines.llamacpp.importer import import_llamacpp
from olarespack.engines.llamacpp.pinned import pinned_shape, read_pinned
from olarespack.engines.llamacpp.rules import rules
from olarespack.engines.llamacpp.semver import image_build
from olarespack.engines.llamacpp.spec import (
    DOWNLOADER,
    PORT,
    LlamaCppCalibration,
    LlamaCppEngine,
    gguf_dir,
    gguf_path,
)
from olarespack.engines.pinned import PinnedRead, PinnedShape
from olarespack.engines.protocol import Engine
from olarespack.engines.releases import ReleaseRules
from olarespack.engines.smoke import EngineSmoke
from olarespack.models.registry import models


class LlamaCpp(Engine[LlamaCppEngine]):
    kind = "llamacpp"
    title = "llama.cpp"
    model = LlamaCppEngine
    port = PORT
    container_name = "llama-server"
    command = (COMMAND,)
    context_field = "ctx_size"
    hf_env = False  # the downloader fetches the files; the server never talks to Hugging Face
    pinned_image = "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101"
    model_source = "gguf"
    weights_format = "GGUF files"
    executables = ("llama-server",)
    calibration_model = LlamaCppCalibration
    calibration_lines = "`<device> model/KV/compute buffer size = X MiB`"
    flags = FLAGS
    caps_slot_context = True  # measured on b9101 and b11434 (tests/test_llamacpp_kv_real.py)

    def image_cuda(self, image: str) -> ImageCuda:
        return cuda.image_cuda(image)

    def image_at(self, image: str, release: str) -> str | None:
        return cuda.image_at(image, release)

    def args(self, engine: LlamaCppEngine) -> list[Arg]:
        """The flag table, the drafter file under the flag its image family reads, the verbosity at which the
        build prints its buffer sizes, then the extra args."""
        table = [arg for flag in self.flags for arg in flag.args(engine)]
        flag = drafter_flag(engine)
        drafter = engine.speculative.drafter if engine.speculative else None
        if flag is not None and drafter is not None:
            table.append(Arg(flag, f"{gguf_dir(engine)}/{engine.model.local(drafter.file)}"))
        verbosity = log_verbosity(engine)
        if verbosity is not None:
            table.append(Arg("--log-verbosity", str(verbosity)))
        return table + [Arg(value=extra) for extra in engine.extra_args]

    def typed_flags(self) -> dict[str, str]:
        return {**super().typed_flags(), **dict.fromkeys(DRAFTER_FLAGS, "engine.speculative.drafter")}

    def init_containers(self, engine: LlamaCppEngine) -> list[ContainerResources]:
        return [DOWNLOADER]

    def template_values(self, engine: LlamaCppEngine) -> dict[str, Any]:
        model = engine.model
        files = [model.file, *([model.mmproj] if model.mmproj else [])]
        found: list[tuple[str, ...]] = [(name, gguf_path(engine, name)) for name in files]
        if model.mmproj and model.mmproj_repo and model.mmproj_repo != model.repo:
            found[1] = (model.mmproj, gguf_path(engine, model.mmproj), model.mmproj_repo, "main")
        drafter = engine.speculative.drafter if engine.speculative else None
        if drafter is not None:
            local = gguf_path(engine, drafter.file)
            same = drafter.repo == model.repo and drafter.revision == model.revision
            found.append((drafter.file, local) if same else (drafter.file, local, drafter.repo, drafter.revision))
        template = engine.chat_template
        return {
            "repo": model.repo,
            "revision": model.revision,
            "files": found,
            # one fixed name in files/ and the ConfigMap: the path's own name could be one .helmignore
            # drops (x.bak), and the mount names the key
            "chat_template": template
            and {
                "path": template.path,
                "file": "chat-template.jinja",
                "text": template.text,
                "sha256": hashlib.sha256(template.text.encode()).hexdigest(),
            },
        }

    def images(self, engine: LlamaCppEngine) -> list[tuple[str, str]]:
        found = [("engine.image", engine.image)]
        if engine.downloader_image:
            found.append(("engine.downloader_image", engine.downloader_image))
        return found

    def context_length(self, engine: LlamaCppEngine) -> int:
        if engine.ctx_size is not None:
            return engine.ctx_size
        known = models().get(engine.model.repo)  # not written: the context the model was trained with
        return (known.trained_context if known else None) or 0

    def model_repo(self, engine: LlamaCppEngine) -> str:
        return engine.model.repo

    def version(self, engine: LlamaCppEngine) -> str | None:
        """The build the tag names, or the one its release tag (`-v0.3.0`) is known to run (semver.py)."""
        build = image_build(engine.image)
        if build is not None:
            return f"b{build}"
        match = re.search(r"-(b\d+)$", image_tag(engine.image) or "")
        return match.group(1) if match else None

    def preset_lines(self, engine: LlamaCppEngine) -> list[str]:
        projector = f" + projector `{engine.model.mmproj}`" if engine.model.mmproj else ""
        return [
            f"- Model: `{engine.model.repo}` file `{engine.model.file}`{projector}",
            f"- Served model name: `{engine.alias}`, context "
            + (f"{engine.ctx_size} tokens" if engine.ctx_size else "the model's trained one"),
        ]

    def model_files(self, engine: LlamaCppEngine) -> list[str] | None:
        return [engine.model.file, *([engine.model.mmproj] if engine.model.mmproj else [])]

    def read_pinned(
        self, model_name: str, model_source: str, engine_args: str, command: list[str], image: str
    ) -> PinnedRead:
        family = family_of(self.kind, image)
        return read_pinned(
            model_name, model_source, engine_args, command or list(family.command if family else self.command)
        )

    def pinned_shape(self, engine: LlamaCppEngine, tag: str | None = None) -> PinnedShape:
        return pinned_shape(engine, tag, self.args(engine), self.typed_flags(), self.server_command(engine))

    def rules(self, file: str, engine: LlamaCppEngine, hardware: str) -> Iterator[Problem]:
        return rules(file, engine, hardware)

    def fit(self, engine: LlamaCppEngine, request: FitRequest) -> FitReport:
        return llamacpp_fit(engine, request)

    def import_argv(self, argv: list[str], image: str, source: ImportSource) -> EngineImport:
        return import_llamacpp(argv, image, source.files, source.texts)

    def log_reader(self) -> LlamaCppLog:
        return LlamaCppLog(self.kind)

    def bench(self) -> EngineBench:
        from olarespack.engines.llamacpp.bench import BENCH

        return BENCH

    def smoke(self) -> EngineSmoke[LlamaCppEngine]:
        from olarespack.engines.llamacpp.smoke import SMOKE

        return SMOKE

    def release_rules(self) -> ReleaseRules:
        from olarespack.engines.llamacpp.release_rules import RULES

        return RULES

    def rule_catalog(self) -> Mapping[str, Rule]:
        return catalog.RULES

    def calibration_values(self, engine: LlamaCppEngine, log: BootLog, gpu_memory: int) -> dict[str, Any]:
        reading = log.of(self.kind, LlamaCppLog)
        return {
            "model_buffer_mib": dict(sorted(reading.model_buffer_mib.items())),
            "kv_buffer_mib": dict(sorted(reading.kv_buffer_mib.items())),
            "compute_buffer_mib": dict(sorted(reading.compute_buffer_mib.items())),
            "n_ctx": reading.n_ctx,
        }
