"""A separate llama.cpp drafter's KV cache in fit, against the real CPU llama-server of each build `make test`
built: a tiny target and a tiny drafter of the same vocabulary (engines/llamacpp/tiny_gguf.py), booted with
`-md` at several contexts and slot counts, and every KV buffer the server allocates (the target's, then the
drafter's: b9101 makes one draft context per slot, b11434 one for every slot) summed from its log. fit's KV
(target and drafter) must equal that sum to the log's last digits (each buffer is printed to 0.01 MiB): the
drafter's grows with the context, which a fit of its weights alone missed (unslothai/unsloth #6719: 580 / 868 /
1252 MiB at 32K / 128K / 262K for a Gemma 4 12B MTP drafter). Skipped, saying how to build them, when
OLARESPACK_LLAMA_SERVERS names none."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from olarespack.engines.fit import FitReport, FitRequest
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.engines.llamacpp.fit import fit
from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.models.arch import ModelInfo
from test_llama_server_boot import BUILD_HINT, given_servers
from test_llamacpp_kv_real import model_of
from test_serve import free_port, stop

MIB = 2**20
BOOT_TIMEOUT_S = 120
# a cache's size line, after the buffer line that allocated it (a fit-params dry run allocates 0.00 MiB)
_KV = re.compile(r"KV buffer size = +([0-9.]+) MiB")
_LISTENING = re.compile(r"server is listening|llama_server: listening on")

PAIRS: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Path]]] = {
    "llama": (
        tiny_gguf.write_dense,
        lambda p: tiny_gguf.write_dense(p, n_layer=2, n_embd=128, n_head=2, n_head_kv=1, n_ff=256, seed=3),
    ),
    "gemma4": (
        lambda p: tiny_gguf.write_gemma4(p, n_embd=256, n_ff=1024, n_head=4, n_head_kv=2, n_embd_per_layer=64),
        lambda p: tiny_gguf.write_gemma4(p, n_embd=128, n_ff=256, n_head=2, n_head_kv=1, n_embd_per_layer=32),
    ),
}
# (-c, --parallel, draft cache type): two slots of their own, llama-server's own slots over a unified cache, a
# quantized draft cache
CASES: list[tuple[int, int | None, str | None]] = [(4096, 2, None), (8192, None, None), (16384, 2, "q8_0")]


@pytest.fixture(scope="module")
def servers() -> dict[int, Path]:
    found = given_servers()
    if not found:
        pytest.skip(BUILD_HINT)
    return found


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[tuple[Path, ModelInfo], tuple[Path, ModelInfo]]]:
    folder = tmp_path_factory.mktemp("drafter-gguf")
    return {
        name: (model_of(target(folder / f"tiny-{name}.gguf")), model_of(drafter(folder / f"tiny-{name}-draft.gguf")))
        for name, (target, drafter) in PAIRS.items()
    }


def fit_with_drafter(
    build: int, target: tuple[Path, ModelInfo], drafter: tuple[Path, ModelInfo], ctx: int, parallel: int | None,
    draft_type: str | None,
) -> FitReport:  # fmt: skip
    (path, info), (draft_path, draft_info) = target, drafter
    engine = LlamaCppEngine.model_validate({
        "kind": "llamacpp", "image": f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}", "alias": "tiny",
        "model": {"repo": info.repo, "file": path.name}, "ctx_size": ctx, "parallel": parallel,
        "speculative": {"type": "draft", "drafter": {"repo": draft_info.repo, "file": draft_path.name},
                        **({"cache_type_k": draft_type, "cache_type_v": draft_type} if draft_type else {})},
    })  # fmt: skip
    return fit(engine, FitRequest(total=64 << 30, registry={info.repo: info, draft_info.repo: draft_info}))


def allocated_kv_mib(binary: Path, target: Path, drafter: Path, argv: list[str], log_file: Path) -> tuple[float, int]:
    """Boot until the server listens, then stop it; the sum of the KV buffers it allocated and how many it printed
    (each to 2 decimals of a MiB; a fit-params dry run's are 0.00). -v: b11434 prints its buffers at that level."""
    command = [str(binary), "-m", str(target), "-md", str(drafter), *argv, "-v", "--host", "127.0.0.1",
               "--port", str(free_port())]  # fmt: skip
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
    assert "draft" in text, "the server loaded no drafter"
    sizes = [float(size) for size in _KV.findall(text) if float(size) > 0]
    return round(sum(sizes), 2), len(sizes)


@pytest.mark.parametrize(("ctx", "parallel", "draft_type"), CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("family", list(PAIRS))
@pytest.mark.parametrize("build", [9101, 11434])
def test_fit_counts_the_drafters_kv_as_the_server_allocates_it(
    build: int, family: str, ctx: int, parallel: int | None, draft_type: str | None, servers: dict[int, Path],
    pairs: dict[str, tuple[tuple[Path, ModelInfo], tuple[Path, ModelInfo]]], tmp_path: Path,
) -> None:  # fmt: skip
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among the built ones ({sorted(servers)}); `make test` builds it")
    target, drafter = pairs[family]
    report = fit_with_drafter(build, target, drafter, ctx, parallel, draft_type)
    argv = ["-c", str(ctx), "-fa", "on", *(["-np", str(parallel)] if parallel else [])]
    argv += ["-ctkd", draft_type, "-ctvd", draft_type] if draft_type else []
    argv += ["--spec-type", "draft-simple"] if build >= 11434 else []  # b11434 frees a drafter no type uses
    measured, lines = allocated_kv_mib(servers[build], target[0], drafter[0], argv, tmp_path / "server.log")
    print(
        f"{family} -c {ctx} -np {parallel or 'auto'} draft {draft_type or 'f16'} b{build}: the server's KV "
        f"{measured:.2f} MiB, fit's {report.kv_cache_needed_bytes / MIB:.2f} MiB (drafter "
        f"{report.drafter_kv_bytes / MIB:.2f})"
    )
    assert report.drafter_kv_bytes > 0
    # to the log's last digit: each buffer is printed rounded to 0.01 MiB (a q8_0 cache is no whole quarter MiB)
    assert abs(measured - report.kv_cache_needed_bytes / MIB) <= 0.005 * lines + 1e-9
