"""Maintainer check: run vLLM's own KV-cache functions, from the sources of a release wheel, over the shipped
models, and write the figures fit is held to (tests/fixtures/vllm_kv_figures.json).

It needs an interpreter with torch (CPU is enough) and the few pure-Python packages vLLM's config modules
import; never the project's .venv. For example:

    python3 -m venv /tmp/vkv && /tmp/vkv/bin/pip install torch pydantic regex numpy cbor2 psutil pyzmq ...
    olarespack releases refresh --engine vllm --out /tmp/x 0.33     # fills the wheel-source cache
    PYTHONPATH=src /tmp/vkv/bin/python tools/engine_releases/vllm_kv_check.py 0.21.0 0.33.0

Each release runs in a child process with that release's sources first on sys.path. No model is loaded and
no GPU is touched: the KV specs are built from the shipped layer data, and the config is a stand-in that
carries only what the KV functions read, with VllmConfig's own properties (max_in_flight_tokens,
max_concurrent_batches, num_prefill_lookahead_tokens) bound to it. async_scheduling is set as each case
says (vLLM's default resolution in VllmConfig.__post_init__ is not run).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from wheel_cache import DEFAULT_CACHE  # noqa: E402

FIXTURE = HERE.parents[1] / "tests" / "fixtures" / "vllm_kv_figures.json"
SEED_KV = round(2.82 * 2**30)
BOOKED_KV = 2_633_687_368
DFLASH_KV = 2_083_037_696
# (case, target repo, drafter repo or None, kv dtype bytes, max_num_batched_tokens, contexts, budgets)
CASES: list[tuple[str, str, str | None, int, int, tuple[int, ...], tuple[int, ...]]] = [
    ("vision", "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit", None, 1, 8192, (16384, 131072, 262144), (SEED_KV, BOOKED_KV)),
    (
        "dflash",
        "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
        "z-lab/gemma-4-26B-A4B-it-DFlash",
        1,
        8192,
        (16384, 131072),
        (DFLASH_KV, BOOKED_KV),
    ),
    ("vision-bf16-mnbt2048", "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit", None, 2, 2048, (8192, 32768), (SEED_KV,)),
]


def _layers(repo: str) -> list[dict[str, Any]]:
    from olarespack.models.registry import models

    arch = models()[repo].arch
    assert arch is not None, repo
    return [
        {"kind": lay.kind, "kv_heads": lay.kv_heads, "head_dim": lay.head_dim, "window": lay.window}
        for lay in arch.layers
    ]


def _stand_in(vllm_config_cls: Any, max_model_len: int, mnbt: int, async_on: bool) -> Any:
    props = ("max_in_flight_tokens", "max_concurrent_batches", "num_prefill_lookahead_tokens", "num_speculative_tokens")
    attrs = {p: getattr(vllm_config_cls, p) for p in props if isinstance(getattr(vllm_config_cls, p, None), property)}
    cls = type("StandInVllmConfig", (SimpleNamespace,), attrs)
    try:  # 0.33: the layout TRITON_ATTN gets, vLLM's default preference (mixed head shapes keep it: block-compact)
        from vllm.v1.kv_cache_layout import KVCacheLayout

        layout: Any = KVCacheLayout.LBNHC
    except ImportError:
        layout = None
    cache = SimpleNamespace(
        num_gpu_blocks_override=None,
        kv_cache_memory_bytes=None,
        block_size=16,
        get_resolved_kv_cache_layout=lambda: layout,
        kv_cache_layout="LBNHC",
        prefix_cache_retention_interval=None,
        kv_sharing_fast_prefill=False,
        mamba_cache_mode="none",
        enable_prefix_caching=True,
    )
    return cls(
        model_config=SimpleNamespace(
            max_model_len=max_model_len,
            original_max_model_len=max_model_len,
            use_mla=False,
            supports_kv_cache_grouping=False,  # Gemma 4 declares none
            hf_config=SimpleNamespace(model_type="gemma4"),
        ),
        scheduler_config=SimpleNamespace(
            max_num_batched_tokens=mnbt, async_scheduling=async_on, disable_hybrid_kv_cache_manager=False
        ),
        parallel_config=SimpleNamespace(
            pipeline_parallel_size=1,
            decode_context_parallel_size=1,
            prefill_context_parallel_size=1,
            tensor_parallel_size=1,
        ),
        cache_config=cache,
        speculative_config=None,
        diffusion_config=None,
        kv_transfer_config=None,
        attention_config=SimpleNamespace(hisparse_config=None),
        kv_events_config=None,
        compilation_config=SimpleNamespace(),
        use_v2_model_runner=False,
    )


def _run_release(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In the child: vLLM's functions over each case."""
    import torch
    from vllm.config import VllmConfig
    from vllm.v1.core import kv_cache_utils as utils
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    try:
        from vllm.v1.core import kv_cache_planning as planning
    except ImportError:
        planning = utils
    dtype = {1: torch.float8_e4m3fn, 2: torch.bfloat16}
    out = []
    for case in cases:
        specs: dict[str, Any] = {}
        for i, lay in enumerate(case["layers"]):
            kw = {
                "block_size": 16,
                "num_kv_heads": lay["kv_heads"],
                "head_size": lay["head_dim"],
                "dtype": dtype[case["kv_bytes"]],
            }
            specs[f"layers.{i}"] = (
                SlidingWindowSpec(sliding_window=lay["window"], **kw)
                if lay["kind"] == "sliding"
                else FullAttentionSpec(**kw)
            )
        cfg = _stand_in(VllmConfig, case["max_model_len"], case["mnbt"], case["async"])
        result: dict[str, Any] = dict(case, layers=None)
        staged = hasattr(planning, "get_global_kv_cache_groups")  # 0.33: grouping is its own step
        groups = (
            planning.get_global_kv_cache_groups(cfg, [dict(specs)])
            if staged
            else planning.get_kv_cache_groups(cfg, dict(specs))
        )
        try:
            configs = (
                planning.get_kv_cache_configs(cfg, [dict(specs)], [case["available"]], groups)
                if staged
                else planning.get_kv_cache_configs(cfg, [dict(specs)], [case["available"]])
            )
            result["fits"] = True
            result["num_blocks"] = configs[0].num_blocks
            result["concurrency"] = utils.get_max_concurrency_for_kv_cache_config(cfg, configs[0])
        except ValueError as err:
            found = re.search(r"estimated maximum model length is (\d+)", str(err))
            result["fits"] = False
            result["estimated_max_model_len"] = int(found[1]) if found else 0
            needed = re.search(r"\(([\d.]+) GiB KV cache is needed", str(err))
            result["needed_gib_text"] = needed[1] if needed else None
        if staged:  # the sizing goes through a builder
            from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder

            builder = get_kv_cache_config_builder(cfg)
            result["needed"] = planning._max_memory_usage_bytes_from_groups(builder, cfg, groups)
        else:
            result["needed"] = planning._max_memory_usage_bytes_from_groups(cfg, groups)
        del result["layers"]
        out.append(result)
    return out


def _sources(version: str, cache: Path, into: Path) -> Path:
    zipped = cache / f"vllm-{version}.sources.zip"
    if not zipped.is_file():
        raise SystemExit(
            f"{zipped} is missing: run olarespack releases refresh --engine vllm --out /tmp/x "
            f"{'.'.join(version.split('.')[:2])} first"
        )
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(into)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=FIXTURE)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_run_release(json.load(sys.stdin))))
        return 0
    cases = [
        {
            "case": name,
            "max_model_len": length,
            "mnbt": mnbt,
            "kv_bytes": kv,
            "available": avail,
            "async": on,
            "layers": _layers(target) + (_layers(drafter) if drafter else []),
        }
        for name, target, drafter, kv, mnbt, lengths, budgets in CASES
        for length in lengths
        for avail in budgets
        for on in (False, True)
    ]
    figures: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for version in args.releases:
        with tempfile.TemporaryDirectory() as tmp:
            src = _sources(version, args.cache, Path(tmp))
            env_path = f"{src}:{HERE.parents[1] / 'src'}"
            done = subprocess.run(
                [sys.executable, __file__, "--child"],
                input=json.dumps(cases),
                capture_output=True,
                text=True,
                env={"PYTHONPATH": env_path, "PATH": "/usr/bin"},
                check=False,
            )
        if done.returncode:
            raise SystemExit(f"vLLM {version}: {done.stderr.strip()[-2000:]}")
        figures[version] = done.stdout.strip().splitlines()[-1] and json.loads(done.stdout.strip().splitlines()[-1])
        print(f"vLLM {version}: {len(figures[version])} cases")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
