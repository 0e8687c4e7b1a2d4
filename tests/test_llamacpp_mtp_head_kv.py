"""A model's own MTP head in llama.cpp's fit, against the real CPU llama-server of each build `make test` built: a
tiny GLM-4.5 with one MTP layer after its trunk (engines/llamacpp/tiny_gguf_mtp.py). Its GGUF's block_count
counts that layer and both builds keep no KV for it in the trunk's cache ("3 layers" of 4), so fit's model data
is the trunk's (as Hugging Face's num_hidden_layers) with num_nextn_predict_layers beside it. With `--spec-type
draft-mtp` and no drafter file, b11434 makes a second context on the same model whose KV cache holds the MTP
layer only, as many tokens as the target's context, in the draft cache types (-ctkd/-ctvd, f16 unless given):
fit's KV (trunk and head) must equal the sum of the buffers the server prints, to its last digits. Skipped,
saying how to build them, when OLARESPACK_LLAMA_SERVERS names none."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from olarespack.engines.fit import FitReport, FitRequest
from olarespack.engines.llamacpp.fit import fit
from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.engines.llamacpp.tiny_gguf_mtp import write_glm4moe
from olarespack.models.arch import ModelInfo
from test_llama_server_boot import BUILD_HINT, given_servers
from test_llamacpp_kv_real import model_of
from test_serve import free_port, stop

pytestmark = pytest.mark.engine
MIB = 2**20
BOOT_TIMEOUT_S = 120
_KV = re.compile(r"llama_kv_cache: size = +([0-9.]+) MiB \( *\d+ cells, +(\d+) layers")
_LISTENING = re.compile(r"server is listening|llama_server: listening on")

# (build, -c, --parallel, the target's cache type, the draft's cache type, drafting with the head)
CASES: list[tuple[int, int, int, str | None, str | None, bool]] = [
    (9101, 4096, 1, None, None, False),
    (11434, 4096, 1, None, None, False),
    (11434, 4096, 1, None, None, True),
    (11434, 8192, 4, "q8_0", None, True),  # the head's cache stays f16: the target's types are not the draft's
    (11434, 16384, 2, None, "q8_0", True),
]


@pytest.fixture(scope="module")
def servers() -> dict[int, Path]:
    found = given_servers()
    if not found:
        pytest.skip(BUILD_HINT)
    return found


@pytest.fixture(scope="module")
def glm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelInfo]:
    return model_of(write_glm4moe(tmp_path_factory.mktemp("mtp") / "tiny-glm4moe.gguf"))


def test_the_model_data_is_the_trunk_with_its_mtp_layers_beside_it(glm: tuple[Path, ModelInfo]) -> None:
    _, info = glm
    assert info.arch is not None
    assert (info.arch.num_hidden_layers, len(info.arch.layers), info.arch.nextn_layers) == (3, 3, 1)
    head = info.arch.mtp_head()
    assert (len(head.layers), head.layers[0].kind, head.nextn_layers) == (1, "full", 0)


def fit_of(glm: tuple[Path, ModelInfo], build: int, ctx: int, parallel: int, kv: str | None, draft: str | None,
           mtp: bool) -> FitReport:  # fmt: skip
    path, info = glm
    speculative = {
        "type": "draft-mtp",
        "draft_max": 2,
        **({"cache_type_k": draft, "cache_type_v": draft} if draft else {}),
    }
    engine = LlamaCppEngine.model_validate({
        "kind": "llamacpp", "image": f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}", "alias": "tiny",
        "model": {"repo": info.repo, "file": path.name}, "ctx_size": ctx, "parallel": parallel,
        **({"cache_type_k": kv, "cache_type_v": kv} if kv else {}), "flash_attn": "on",
        **({"speculative": speculative} if mtp else {}),
    })  # fmt: skip
    return fit(engine, FitRequest(total=64 << 30, registry={info.repo: info}))


def allocated(binary: Path, model: Path, argv: list[str], log_file: Path) -> list[tuple[float, int]]:
    """(MiB, layers) of each KV cache the server allocated: the trunk's, then the head's context's."""
    command = [str(binary), "-m", str(model), *argv, "-v", "--host", "127.0.0.1", "--port", str(free_port())]
    started = time.monotonic()
    with log_file.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            while time.monotonic() - started < BOOT_TIMEOUT_S and server.poll() is None:
                if _LISTENING.search(log_file.read_text(encoding="utf-8", errors="replace")):
                    break
                time.sleep(0.1)
        finally:
            code = server.poll()
            if code is None:
                stop(server, grace=30)
    text = log_file.read_text(encoding="utf-8", errors="replace")
    assert code is None and _LISTENING.search(text), f"llama-server did not come up (exit {code}):\n{text[-4000:]}"
    # the last boot's caches: a fit-params dry run allocates each once before (its buffers are 0.00 MiB)
    last = text[text.rindex("CPU_Mapped model buffer") :] if "CPU_Mapped model buffer" in text else text
    return [(float(size), int(layers)) for size, layers in _KV.findall(last)]


@pytest.mark.parametrize(("build", "ctx", "parallel", "kv", "draft", "mtp"), CASES, ids=lambda v: str(v))
def test_fit_counts_the_mtp_heads_kv_as_the_server_allocates_it(
    build: int, ctx: int, parallel: int, kv: str | None, draft: str | None, mtp: bool, servers: dict[int, Path],
    glm: tuple[Path, ModelInfo], tmp_path: Path,
) -> None:  # fmt: skip
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among the built ones ({sorted(servers)}); `make test` builds it")
    report = fit_of(glm, build, ctx, parallel, kv, draft, mtp)
    argv = ["-c", str(ctx), "-np", str(parallel), "-fa", "on"]
    argv += ["-ctk", kv, "-ctv", kv] if kv else []
    argv += ["-ctkd", draft, "-ctvd", draft] if draft else []
    argv += ["--spec-type", "draft-mtp"] if mtp else []
    caches = allocated(servers[build], glm[0], argv, tmp_path / "server.log")
    assert [layers for _, layers in caches] == ([3, 1] if mtp else [3])  # the trunk's; the head's own context
    measured = sum(size for size, _ in caches)
    print(f"b{build} {argv}: the server's KV {measured:.2f} MiB, fit's {report.kv_cache_needed_bytes / MIB:.2f}")
    assert (report.drafter_kv_bytes > 0) == mtp
    assert abs(measured - report.kv_cache_needed_bytes / MIB) <= 0.005 * len(caches) + 1e-9
    if mtp:
        assert abs(caches[1][0] - report.drafter_kv_bytes / MIB) <= 0.005 + 1e-9
