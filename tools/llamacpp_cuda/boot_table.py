"""The committed table of CUDA boots (tests/fixtures/llama-boots/): what boots.py recorded on the H200, read
from its logs and readings, with the estimates people use instead, each run here on the same configuration.

- llama.cpp's own: the server's `--fit` dry pass ("projected to use N MiB of device memory", its model, KV and
  compute buffers; for a projector it adds mtmd's "estimated worst-case memory usage of mmproj" to its free-
  memory target, so that figure is added), and `llama-fit-params --fit-print on` with the row's arguments.
- hf-mem 0.5.6: its CLI reads a GGUF header from huggingface.co only (HTTP range requests), so its own parser
  (`hf_mem.gguf.parse_gguf_metadata`, --experimental for the KV cache) is given the local file's header; total =
  tensor bytes + KV, as its CLI prints `total_memory`. The projector's bytes are added for a projector row.
- llmfit 1.1.17: runs offline from its built-in catalog (`llmfit plan MODEL --context N --quant Q4_K_M
  --kv-quant T --json`, `minimum.vram_gb`, GiB) for the real models these files have the shapes of; it reads no
  local GGUF and knows no projector.
A tool that cannot express a row (one cache type for K and V, a K-only quantized cache) gets null there.
The model facts of the synthetic files are written as `olarespack model add --gguf` writes them.

Usage: python tools/llamacpp_cuda/boot_table.py LOGS READINGS.jsonl[,...] FITPARAMS.txt GGUF_DIR HFMEM_PYTHON LLMFIT
       python tools/llamacpp_cuda/boot_table.py --held-out LOGS READINGS.jsonl FITPARAMS.txt OUT.json
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from olarespack.engines import read_boot_log  # noqa: E402
from olarespack.engines.llamacpp.bootlog import LlamaCppLog  # noqa: E402
from olarespack.models.add import Described, gguf_data, render  # noqa: E402
from olarespack.models.gguf_file import read_gguf  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "llama-boots"
FILES = {"e4b": "e4b.gguf", "llama8b": "llama8b.gguf", "mmproj": "mmproj-t524.gguf"}
LLMFIT_MODEL = {"e4b": "google/gemma-4-E4B-it", "llama8b": "meta-llama/Llama-3.1-8B-Instruct"}
HFMEM = """
import json, sys
from hf_mem.gguf.metadata import parse_gguf_metadata
raw = open(sys.argv[1], "rb").read(int(sys.argv[2]))
kv = sys.argv[4] if sys.argv[4] != "none" else None
meta = parse_gguf_metadata(raw, experimental=kv is not None, max_model_len=int(sys.argv[3]), kv_cache_dtype=kv or "F16")
print(json.dumps({"bytes": meta.bytes_count, "kv": meta.kv_cache.cache_size if meta.kv_cache else 0}))
"""


def _arg(args: list[str], flag: str, default: str) -> str:
    return args[args.index(flag) + 1] if flag in args else default


def _hf_mem(python: str, path: Path, header: int, ctx: int, kv: str | None) -> int:
    done = subprocess.run(
        [python, "-c", HFMEM, str(path), str(header), str(ctx), kv or "none"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    return int(found["bytes"]) + int(found["kv"])


def _llmfit(binary: str, model: str, ctx: int, kv: str) -> float:
    done = subprocess.run(
        [binary, "plan", model, "--context", str(ctx), "--quant", "Q4_K_M", "--kv-quant", kv, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout)["minimum"]["vram_gb"])


def _fit_params(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for block in text.split("== ")[1:]:
        name = block.split(" ", 1)[0]
        cuda = re.search(r"^CUDA0 (\d+) (\d+) (\d+)", block, re.M)
        if cuda:
            found[name] = sum(int(x) for x in cuda.groups())
    return found


def models(gguf_dir: Path) -> dict[str, int]:
    """Write the synthetic files' model facts; return each file's header size (what hf-mem reads)."""
    headers = {key: read_gguf(gguf_dir / name) for key, name in FILES.items()}
    for key in ("e4b", "llama8b"):
        repo = f"h200-boots/{key}-shapes"
        described = Described(
            repo=repo, command=f"olarespack model add {repo} --gguf {FILES[key]} --gguf {FILES['mmproj']}"
        )
        data = gguf_data(described, [headers[key], headers["mmproj"]])
        (OUT / f"{key}-shapes.yaml").write_text(render(data, described), encoding="utf-8")
    sizes = {}
    import gguf  # the header's end: where the tensor data starts

    for key, name in FILES.items():
        sizes[key] = gguf.GGUFReader(str(gguf_dir / name)).data_offset
    return sizes


def entry_of(name: str, row: dict[str, Any], logs: Path) -> dict[str, Any]:
    """One boot's row: its configuration (from its arguments), nvidia-smi's readings of its process, and the
    buffers its log printed (llama.cpp's own projection too), without the other tools' estimates."""
    args, model = row["args"], row["model"]
    ctx, parallel = int(_arg(args, "-c", "0")), int(_arg(args, "-np", "1"))
    type_k, type_v = _arg(args, "-ctk", "f16"), _arg(args, "-ctv", "f16")
    mmproj = "--mmproj" in args
    measured = row["readings"]
    entry = {
        "name": name,
        "model": model,
        "ctx": ctx,
        "parallel": parallel,
        "type_k": type_k,
        "type_v": type_v,
        "mmproj": mmproj,
        "batch": int(_arg(args, "-b", "512")),
        "ubatch": int(_arg(args, "-ub", "512")),
        "flash_attn": True,
        "process_mib": max(v for k, v in measured.items() if isinstance(v, int)),
        "readings_mib": {k: v for k, v in measured.items() if isinstance(v, int)},
    }
    log_path = logs / f"{name}.log"
    if log_path.is_file():
        text = log_path.read_text(encoding="utf-8", errors="replace")
        log = read_boot_log(log_path).of("llamacpp", LlamaCppLog)
        clip = [float(x) for x in re.findall(r"reserve_compute_meta:\s+CUDA0 compute buffer size =\s+([\d.]+)", text)]
        entry["buffers_mib"] = {
            "model": log.model_buffer_mib.get("CUDA0"),
            "kv": sum(v for k, v in log.kv_buffer_mib.items() if k == "CUDA0"),
            "compute": round(log.compute_buffer_mib.get("CUDA0", 0) - sum(clip), 2),
            "host_compute": log.compute_buffer_mib.get("CUDA_Host"),
            "projector_compute": clip,
        }
        projected = [int(x) for x in re.findall(r"projected to use (\d+) MiB of device memory", text)]
        mtmd = [float(x) for x in re.findall(r"estimated worst-case memory usage of mmproj is ([\d.]+) MiB", text)]
        entry["llamacpp_projected_mib"] = round(projected[0] + (mtmd[0] if mtmd else 0), 2)
    else:
        entry["buffers_mib"] = None  # the log did not come back (the first call's 8-file limit)
        entry["llamacpp_projected_mib"] = None
    return entry


def held_out(logs: Path, readings_file: Path, fit_params_file: Path, out: Path) -> None:
    """The boots of configurations fit was not fitted to (boots.py HELD_OUT), with llama.cpp's own estimates."""
    fit_params = _fit_params(fit_params_file.read_text(encoding="utf-8"))
    rows = []
    for line in sorted(readings_file.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        entry = entry_of(row["name"], row, logs)
        entry["llama_fit_params_mib"] = fit_params.get(row["name"])
        rows.append(entry)
    rows.sort(key=lambda entry: entry["name"])
    out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"{len(rows)} boots -> {out}")


def main() -> None:
    if sys.argv[1] == "--held-out":  # LOGS READINGS.jsonl FITPARAMS.txt OUT.json
        held_out(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]))
        return
    logs, readings_files, fit_params_file, gguf_dir = (
        Path(sys.argv[1]),
        sys.argv[2],
        Path(sys.argv[3]),
        Path(sys.argv[4]),
    )
    hf_python, llmfit = sys.argv[5], sys.argv[6]
    OUT.mkdir(parents=True, exist_ok=True)
    header = models(gguf_dir)
    readings = {}
    for part in readings_files.split(","):
        for line in Path(part).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            readings[row["name"]] = row
    fit_params = _fit_params(fit_params_file.read_text(encoding="utf-8"))
    rows = []
    for name in sorted(readings):
        row = readings[name]
        model = row["model"]
        entry = entry_of(name, row, logs)
        ctx, type_k, type_v, mmproj = entry["ctx"], entry["type_k"], entry["type_v"], entry["mmproj"]
        entry["llama_fit_params_mib"] = fit_params.get(name)
        both = type_k == type_v
        kv = type_k.upper() if both else None
        hf = _hf_mem(hf_python, gguf_dir / FILES[model], header[model], ctx, kv) if both else None
        if hf is not None and mmproj:
            hf += _hf_mem(hf_python, gguf_dir / FILES["mmproj"], header["mmproj"], ctx, None)
        entry["hf_mem_mib"] = round(hf / 2**20, 2) if hf is not None else None
        kv_llmfit = {"f16": "fp16", "q8_0": "q8_0", "q4_0": "q4_0"}[type_k] if both else None
        entry["llmfit_mib"] = (
            round(_llmfit(llmfit, LLMFIT_MODEL[model], ctx, kv_llmfit) * 1024, 2) if kv_llmfit else None
        )
        rows.append(entry)
    (OUT / "h200-b11434.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"{len(rows)} boots -> {OUT / 'h200-b11434.json'}")


if __name__ == "__main__":
    main()
