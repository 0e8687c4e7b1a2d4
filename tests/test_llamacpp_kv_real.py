"""fit's llama.cpp arithmetic against the real CPU llama-server: tiny GGUFs of the architecture families the
apps serve (engines/llamacpp/tiny_gguf.py: Gemma 4 with its sliding window and KV-shared tail, a dense Llama, a
Qwen3 MoE)
are booted at several contexts with `-c CTX -v` on every build `make test` built (b9101 and b11434), and the
buffer lines the server prints are read with calibrate's own log reader (engines/llamacpp/bootlog.py).

fit's figures come from olarespack's own path: the model facts are made from the GGUF header as
`olarespack model add --gguf` makes them (no hand-typed architecture), and fit() sizes an engine spec of the
same context and --parallel. What is asserted, per family x context x build:
- KV: fit's KV bytes equal the sum of the server's KV buffer lines (printed in MiB to 2 decimals; the tiny
  shapes make every cache a whole number of quarter MiB, so the equality is exact), and each cache's cells;
- weights: the model buffers equal the GGUF file within 0.5% (the file adds only its header and alignment);
- compute: the CPU compute buffer within COMPUTE_BOUND of fit's GPU compute estimate (llamacpp_compute_bytes,
  fitted to CUDA boots: fit sizes no CPU buffer, so this bound only catches drift). Measured on these shapes:
  b11434 0.93 to 1.28 of the estimate with llama-server's own --parallel, 0.53 to 0.68 with -np 2 (its mask
  spans one slot's cells, fit's the whole context's); b9101 1.11 to 2.52 (its CPU graph reserves more).

The servers are booted until they listen, then stopped: 18 boots, about 6 s on two shared cores. Skipped, saying
how to build them, when OLARESPACK_LLAMA_SERVERS names none.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from olarespack.engines import read_boot_log
from olarespack.engines.fit import FitReport, FitRequest
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.engines.llamacpp.bootlog import LlamaCppLog
from olarespack.engines.llamacpp.fit import fit
from olarespack.engines.llamacpp.flags import log_verbosity
from olarespack.engines.llamacpp.kv import llamacpp_compute_bytes
from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.models.add import Described, gguf_data, parse_text, render
from olarespack.models.arch import ModelInfo
from olarespack.models.gguf_file import read_gguf
from test_llama_server_boot import BUILD_HINT, given_servers
from test_serve import free_port, stop

MIB = 2**20
BOOT_TIMEOUT_S = 120  # two shared cores may be busy beside the server
WEIGHTS_TOLERANCE = 0.005
COMPUTE_BOUND = (0.45, 2.75)  # the CPU compute buffer over fit's GPU estimate: measured 0.53 to 2.52
_CELLS = re.compile(r"llama_kv_cache: size = {0,16}[0-9.]{1,16} MiB \( {0,16}(\d{1,9}) cells")
_LISTENING = re.compile(r"server is listening|llama_server: listening on")

FAMILIES: dict[str, Callable[[Path], Path]] = {
    # bigger than the boot test's Gemma 4, so that 0.01 MiB is well under 0.5% of the weights
    "gemma4": lambda p: tiny_gguf.write_gemma4(p, n_embd=256, n_ff=1024, n_head=4, n_head_kv=2, n_embd_per_layer=64),
    "llama": tiny_gguf.write_dense,
    "qwen3moe": tiny_gguf.write_moe,
}
# (-c, --parallel): llama-server's own --parallel (fit takes 4 slots over a unified cache), then 2 slots of their
# own at a context that is not a multiple of 256 (each slot's share is padded)
CONTEXTS: list[tuple[int, int | None]] = [(2048, None), (16384, None), (20000, 2)]


@dataclass(frozen=True)
class Measured:
    log: LlamaCppLog
    cells: list[int]  # per KV cache, in the order the server printed them (its last pass)
    text: str


@pytest.fixture(scope="module")
def servers() -> dict[int, Path]:
    found = given_servers()
    if not found:
        pytest.skip(BUILD_HINT)
    return found


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, ModelInfo]]:
    folder = tmp_path_factory.mktemp("kv-gguf")
    return {name: model_of(write(folder / f"tiny-{name}.gguf")) for name, write in FAMILIES.items()}


def model_text(path: Path) -> str:
    """The model file `olarespack model add --gguf` writes for this GGUF (models/<name>.yaml)."""
    described = Described(repo=f"tiny/{path.stem}", command=f"olarespack model add tiny/{path.stem} --gguf {path.name}")
    return render(gguf_data(described, [read_gguf(path)]), described)


def model_of(path: Path) -> tuple[Path, ModelInfo]:
    """The model facts `olarespack model add --gguf` writes for this file, read back as fit reads them."""
    return path, parse_text(path.name, model_text(path))


def fit_of(info: ModelInfo, path: Path, ctx: int, parallel: int | None, flash_attn: str = "auto") -> FitReport:
    engine = LlamaCppEngine.model_validate({
        "kind": "llamacpp", "image": "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101", "alias": "tiny",
        "model": {"repo": info.repo, "file": path.name}, "ctx_size": ctx, "parallel": parallel,
        "flash_attn": flash_attn,
    })  # fmt: skip
    return fit(engine, FitRequest(total=64 << 30, registry={info.repo: info}))


def boot_log(
    binary: Path,
    model: Path,
    ctx: int,
    parallel: int | None,
    log_file: Path,
    extra: tuple[str, ...] = (),
    verbosity: tuple[str, ...] = ("-v",),
) -> Measured:
    """Boot until the server listens, then stop it; its buffer lines as calibrate reads them."""
    argv = [
        str(binary),
        "-m",
        str(model),
        "-c",
        str(ctx),
        *verbosity,
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
    ]
    argv += (["-np", str(parallel)] if parallel else []) + list(extra)
    started = time.monotonic()
    with log_file.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
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
    found = read_boot_log(log_file)
    assert found.engine == "llamacpp", f"calibrate's reader does not take {log_file.name} for a llama.cpp boot"
    log = found.of("llamacpp", LlamaCppLog)
    last_pass = text[text.rindex("CPU_Mapped model buffer") :] if "CPU_Mapped model buffer" in text else text
    return Measured(log, [int(c) for c in _CELLS.findall(last_pass)], text)


def expected_cells(report: FitReport, info: ModelInfo) -> list[int]:
    """Each cache's cells per stream as fit sizes them (the server prints one stream's): the full-attention
    cache, then the sliding one, as iSWA prints them."""
    assert info.arch is not None
    unified, parallel = bool(report.settings["kv_unified"]), int(report.settings["parallel"])
    per_stream = int(report.settings["n_ctx"]) // (1 if unified else parallel)
    cells = [per_stream] if any(lay.kind == "full" for lay in info.arch.layers) else []
    windows = [lay.window for lay in info.arch.layers if lay.window]
    if windows:
        wanted = windows[0] * (parallel if unified else 1) + int(report.settings["n_ubatch"])
        cells.append(min(per_stream, -(-wanted // 256) * 256))
    return cells


@pytest.mark.parametrize(("ctx", "parallel"), CONTEXTS, ids=lambda v: str(v))
@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("build", [9101, 11434])
def test_fit_agrees_with_the_real_server(
    build: int, family: str, ctx: int, parallel: int | None, servers: dict[int, Path],
    models: dict[str, tuple[Path, ModelInfo]], tmp_path: Path,
) -> None:  # fmt: skip
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among the built ones ({sorted(servers)}); `make test` builds it")
    path, info = models[family]
    assert info.arch is not None
    report = fit_of(info, path, ctx, parallel)
    measured = boot_log(servers[build], path, ctx, parallel, tmp_path / "server.log")
    log = measured.log
    assert log.version == f"b{build}" and log.n_ctx == report.settings["n_ctx"], (log.version, log.n_ctx)
    # KV: to the log's last digit, and cell for cell
    assert sum(log.kv_buffer_mib.values()) == round(report.kv_cache_needed_bytes / MIB, 2)
    assert report.kv_cache_needed_bytes % (MIB // 4) == 0  # whole quarter MiB: 2 decimals print it unrounded
    assert measured.cells == expected_cells(report, info)
    # weights: the GGUF file (GPU part plus the host part fit names) against the model buffers
    host = info.files[path.name].host_bytes - info.files[path.name].gpu_copy_bytes  # a CPU boot makes no copy
    loaded = sum(log.model_buffer_mib.values()) * MIB
    assert abs(loaded - (report.weights_bytes + host)) <= WEIGHTS_TOLERANCE * loaded
    # compute: the CPU buffer within the stated bound of fit's GPU estimate
    estimate = llamacpp_compute_bytes(
        info.arch,
        int(report.settings["n_ubatch"]),
        int(report.settings["n_ctx"]),
        flash_attn=bool(report.settings["flash_attn"]),
    )
    cpu = log.compute_buffer_mib["CPU"] * MIB
    print(
        f"{family} -c {ctx} -np {parallel or 'auto'} b{build}: KV {sum(log.kv_buffer_mib.values()):.2f} MiB "
        f"cells {measured.cells}, model {loaded / MIB:.2f} MiB vs file {(report.weights_bytes + host) / MIB:.2f}, "
        f"compute {cpu / MIB:.2f} MiB = {cpu / estimate:.2f} of fit's {estimate / MIB:.2f}"
    )
    assert COMPUTE_BOUND[0] * estimate <= cpu <= COMPUTE_BOUND[1] * estimate


@pytest.mark.parametrize("build", [9101, 11434])
def test_without_flash_attention_the_v_cache_is_as_wide_as_the_widest_layer(
    build: int, servers: dict[int, Path], models: dict[str, tuple[Path, ModelInfo]], tmp_path: Path,
) -> None:  # fmt: skip
    """-fa off stores V transposed, each layer's rows as wide as the widest layer's: Gemma 4's sliding layers
    (head 32) then take as much V as its full layer (head 64), which the CUDA boots of E4B's shapes showed too."""
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among the built ones ({sorted(servers)}); `make test` builds it")
    path, info = models["gemma4"]
    report = fit_of(info, path, 16384, 1, flash_attn="off")
    with_flash = fit_of(info, path, 16384, 1, flash_attn="on")
    assert report.kv_cache_needed_bytes > with_flash.kv_cache_needed_bytes  # the arithmetic tells them apart
    log = boot_log(servers[build], path, 16384, 1, tmp_path / "server.log", extra=("-fa", "off")).log
    assert sum(log.kv_buffer_mib.values()) == round(report.kv_cache_needed_bytes / MIB, 2)


@pytest.mark.parametrize("build", [9101, 11434])
def test_the_charts_verbosity_prints_what_calibrate_reads(
    build: int, servers: dict[int, Path], models: dict[str, tuple[Path, ModelInfo]], tmp_path: Path,
) -> None:  # fmt: skip
    """The verbosity the chart sets for the build (none for b9101; --log-verbosity 4 for b11434, whose default
    hides libllama's info lines) prints the buffer lines calibrate reads, and fit's KV equals them."""
    if build not in servers:
        pytest.skip(f"no b{build} llama-server among the built ones ({sorted(servers)}); `make test` builds it")
    path, info = models["gemma4"]
    engine = LlamaCppEngine.model_validate({
        "kind": "llamacpp", "image": f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}", "alias": "tiny",
        "model": {"repo": info.repo, "file": path.name}, "ctx_size": 4096,
    })  # fmt: skip
    level = log_verbosity(engine)
    assert level == (None if build == 9101 else 4)
    log = boot_log(
        servers[build],
        path,
        4096,
        None,
        tmp_path / "server.log",
        verbosity=("--log-verbosity", str(level)) if level else (),
    ).log
    assert log.calibrated and log.model_buffer_mib and log.compute_buffer_mib
    assert sum(log.kv_buffer_mib.values()) == round(fit_of(info, path, 4096, None).kv_cache_needed_bytes / MIB, 2)


def test_the_tiny_families_are_what_llama_cpp_reads(models: dict[str, tuple[Path, ModelInfo]]) -> None:
    """The facts model add reads from each tiny file: the shapes the boots above exercise."""
    gemma = models["gemma4"][1].arch
    dense = models["llama"][1].arch
    moe = models["qwen3moe"][1].arch
    assert gemma is not None and dense is not None and moe is not None
    # Gemma 4: three KV layers (two sliding of head 32, one full of head 64) and a three-layer shared tail
    assert [(lay.kind, lay.head_dim) for lay in gemma.layers] == [("sliding", 32), ("sliding", 32), ("full", 64)]
    assert gemma.num_hidden_layers == 6 and models["gemma4"][1].files["tiny-gemma4.gguf"].host_bytes > 0
    assert {(lay.kind, lay.kv_heads, lay.head_dim) for lay in dense.layers} == {("full", 2, 64)}
    assert len(dense.layers) == 4
    assert (moe.moe_intermediate_size, moe.experts_per_token) == (128, 2)
    assert tiny_gguf.gguf_keys(models["qwen3moe"][0])["qwen3moe.expert_count"] == 8


@pytest.mark.parametrize("build", [9101, 11434])
def test_a_context_past_the_positions_boots_with_each_slot_capped(
    build: int, servers: dict[int, Path], tmp_path: Path
) -> None:
    """llama-server does not refuse a context past the model's trained one: it allocates the KV cache for every
    cell and caps each slot at the trained context. lint says so as a warning, about a slot's context."""
    from olarespack.fit.budget import resolve_context
    from olarespack.spec.load import load_spec
    from specs import app_data, write_spec

    if build not in servers:
        pytest.skip(f"no b{build} llama-server among the built ones ({sorted(servers)}); `make test` builds it")
    path, info = model_of(tiny_gguf.write_dense(tmp_path / "short.gguf", ctx_train=8192))
    measured = boot_log(servers[build], path, 32768, 2, tmp_path / "server.log")
    assert "exceeds the training context of the model (8192) - capping" in measured.text
    assert sum(measured.log.kv_buffer_mib.values()) == round(
        fit_of(info, path, 32768, 2).kv_cache_needed_bytes / MIB, 2
    )
    data = app_data("gemma4-audio")
    data["engine"].update(model={"repo": info.repo, "file": path.name}, ctx_size=32768, parallel=2)
    data["engine"].pop("calibration", None)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "short.yaml").write_text(model_text(path), encoding="utf-8")
    (tmp_path / "apps").mkdir()
    spec_file = write_spec(tmp_path / "apps", data)
    _, problems = resolve_context(str(spec_file), load_spec(spec_file))
    [window] = [p for p in problems if p.rule == "context-window"]
    assert (
        window.severity == "warning"
        and "a slot of 16384 tokens" in window.message
        and "caps each slot" in window.message
    )
    assert window.fix == "use at most 16384 for 2 slots"
