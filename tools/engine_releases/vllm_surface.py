"""Write vLLM's option surface per release, read from the `vllm` wheels' Python sources (never imported).

Usage:
  python tools/engine_releases/vllm_surface.py [--out DIR] [VERSION ...]   # 0.33 (newest patch) or 0.33.0
  python tools/engine_releases/vllm_surface.py [--out DIR] --wheel FILE.whl  # a wheel already on disk

With no VERSION, every minor from 0.20 to the newest on PyPI. Each release becomes DIR/vllm-<minor>.json.
Wheels are fetched with `pip download` into the cache (see wheel_cache.py); only their sources are kept.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import wheel_cache
from pysource import SourceError, SourceTree, assignments, class_fields, find_class, literal_values, unique
from vllm_args import ConfigIndex, deprecations, engine_args, frontend_args, frontend_path

FIRST_MINOR = (0, 20)
# beside the vLLM engine package, where lint reads them
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "src" / "olarespack" / "engines" / "vllm" / "releases"
SPECULATIVE = "vllm/config/speculative.py"
CACHE = "vllm/config/cache.py"
ATTENTION = "vllm/v1/attention/backends/registry.py"
ENVS = "vllm/envs.py"
PARSER_PACKAGES = {
    "tool_parsers": (("vllm/tool_parsers", "vllm/entrypoints/openai/tool_parsers"), "ToolParserManager"),
    "reasoning_parsers": (("vllm/reasoning",), "ReasoningParserManager"),
}


def _literal(tree: SourceTree, path: str, name: str) -> list[str]:
    node = assignments(tree.module(path)).get(name)
    if node is None:
        raise SourceError(f"{path}: no {name} = Literal[...]")
    values = unique(literal_values(node, assignments(tree.module(path))))
    if not values:
        raise SourceError(f"{path}: {name} holds no string literals")
    return values


def speculative(tree: SourceTree) -> dict[str, list[str]]:
    cls = find_class(tree.module(SPECULATIVE), "SpeculativeConfig")
    if cls is None:
        raise SourceError(f"{SPECULATIVE}: no class SpeculativeConfig")
    return {
        "methods": sorted(_literal(tree, SPECULATIVE, "SpeculativeMethod")),
        "mtp_model_types": sorted(_literal(tree, SPECULATIVE, "MTPModelTypes")),
        "keys": sorted(f.name for f in class_fields(cls)),
    }


def attention_backends(tree: SourceTree) -> list[str]:
    cls = find_class(tree.module(ATTENTION), "AttentionBackendEnum")
    if cls is None:
        raise SourceError(f"{ATTENTION}: no class AttentionBackendEnum")
    return sorted(t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name))


def env_vars(tree: SourceTree) -> list[str]:
    table = assignments(tree.module(ENVS)).get("environment_variables")
    if not isinstance(table, ast.Dict):
        raise SourceError(f"{ENVS}: no environment_variables = {{...}} table")
    return sorted(k.value for k in table.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))


def _names_of_call(call: ast.Call) -> list[str]:
    node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def registered_parsers(tree: SourceTree, packages: tuple[str, ...], manager: str) -> list[str]:
    """Names a parser registry knows without plugins: keys of `_..._TO_REGISTER` tables in the package's
    `__init__.py`, `Manager.register_lazy_module(name, ...)` calls and `@Manager.register_module(name)`."""
    package = next((p for p in packages if tree.has(f"{p}/__init__.py")), None)
    if package is None:
        raise SourceError(f"none of {', '.join(packages)} has an __init__.py")
    names: list[str] = []
    for var, value in assignments(tree.module(f"{package}/__init__.py")).items():
        if re.fullmatch(r"_?[A-Z_]*TO_REGISTER", var) and isinstance(value, ast.Dict):
            names += [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    for path in tree.glob(f"{package}/*.py"):
        if manager not in tree.text(path):
            continue
        for node in ast.walk(tree.module(path)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"register_module", "register_lazy_module"}
                    and ast.unparse(node.func.value).endswith(manager)):
                names += _names_of_call(node)
    if not names:
        raise SourceError(f"{package}: no parser registrations found")
    return sorted(set(names))


def _long(flags: list[str]) -> str:
    """The flag argparse derives `--no-<flag>` from: the first long one."""
    return next((f for f in flags if f.startswith("--")), flags[0])


def extract(tree: SourceTree) -> dict[str, Any]:
    """Every fact of one release, from its sources alone."""
    configs = ConfigIndex(tree)
    fields, engine_cli = engine_args(tree, configs)
    frontend = frontend_args(tree, configs)
    flags_of = {a.dest: a.flags for a in engine_cli}
    field_names = {f.name for f in fields}
    facts: dict[str, Any] = {
        "engine_args": {f.name: flags_of.get(f.name, []) for f in fields},
        "engine_cli_only": {a.dest: a.flags for a in engine_cli if a.dest not in field_names},
        "frontend_args": {a.dest: a.flags for a in frontend},
        "negatable_flags": sorted({_long(a.flags) for a in engine_cli + frontend if a.negatable}),
        "deprecated_flags": deprecations(tree, engine_cli + frontend),
        "speculative": speculative(tree),
        "kv_cache_dtypes": sorted(_literal(tree, CACHE, "CacheDType")),
        "attention_backends": attention_backends(tree),
        "env_vars": env_vars(tree),
    }
    for key, (packages, manager) in PARSER_PACKAGES.items():
        facts[key] = registered_parsers(tree, packages, manager)
    facts["sources"] = {"arg_utils": "vllm/engine/arg_utils.py", "frontend": frontend_path(tree),
                        "speculative": SPECULATIVE, "cache": CACHE, "attention": ATTENTION, "envs": ENVS}
    facts["counts"] = counts(facts)
    return facts


def counts(facts: dict[str, Any]) -> dict[str, int]:
    spec = facts["speculative"]
    return {
        "engine_args": len(facts["engine_args"]), "frontend_args": len(facts["frontend_args"]),
        "deprecated_flags": len(facts["deprecated_flags"]), "speculative_methods": len(spec["methods"]),
        "speculative_keys": len(spec["keys"]), "kv_cache_dtypes": len(facts["kv_cache_dtypes"]),
        "attention_backends": len(facts["attention_backends"]), "tool_parsers": len(facts["tool_parsers"]),
        "reasoning_parsers": len(facts["reasoning_parsers"]), "env_vars": len(facts["env_vars"]),
    }


def release_json(artifact: wheel_cache.Artifact, tree: SourceTree) -> str:
    document = {"engine": "vllm", "artifact": {"file": artifact.file, "sha256": artifact.sha256,
                                               "size": artifact.size, "version": artifact.version}}
    document.update(extract(tree))
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".part", delete=False, encoding="utf-8") as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def resolve(requested: list[str]) -> list[str]:
    """Exact versions as given; a bare minor (0.33) or nothing (every minor since 0.20) -> newest patch."""
    if requested and all(v.count(".") >= 2 for v in requested):
        return requested
    newest = wheel_cache.newest_per_minor(wheel_cache.available_versions("vllm"))
    if not requested:
        return sorted((v for m, v in newest.items() if wheel_cache._key(m) >= FIRST_MINOR), key=wheel_cache._key)
    missing = [v for v in requested if v.count(".") < 2 and v not in newest]
    if missing:
        raise wheel_cache.FetchError(f"no vllm release on PyPI for {', '.join(missing)}")
    return [newest[v] if v.count(".") < 2 else v for v in requested]


def _wheel_version(path: Path) -> str:
    match = re.match(r"vllm-(\d+(?:\.\d+)+(?:\.post\d+)?)-", path.name)
    if not match:
        raise wheel_cache.FetchError(f"{path}: not a vllm wheel name (vllm-<version>-...whl)")
    return match.group(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", metavar="VERSION", help="0.33 (newest patch) or 0.33.0")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"folder for vllm-<minor>.json (default {DEFAULT_OUT})")
    parser.add_argument("--wheel", type=Path, action="append", default=[], help="read this wheel, no download")
    parser.add_argument("--cache", type=Path, default=wheel_cache.DEFAULT_CACHE, help="download cache folder")
    args = parser.parse_args(argv)
    failures: list[str] = []
    jobs: list[tuple[str, Any]] = []
    try:
        if args.wheel:
            jobs = [(_wheel_version(w), w) for w in args.wheel]
        else:
            jobs = [(v, None) for v in resolve(args.versions)]
    except wheel_cache.FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for version, wheel in jobs:
        target = args.out / f"vllm-{minor_of(version)}.json"
        try:
            if wheel is not None:
                with tempfile.TemporaryDirectory() as tmp:
                    sources, artifact = wheel_cache.slim_wheel(wheel, Path(tmp), "vllm", version)
                    tree = SourceTree.from_zip(sources)
            else:
                sources, artifact = wheel_cache.fetch("vllm", version, args.cache)
                tree = SourceTree.from_zip(sources)
            write_atomically(target, release_json(artifact, tree))
            print(f"ok {version} -> {target}")
        except (wheel_cache.FetchError, SourceError, OSError, ValueError) as exc:
            failures.append(version)
            print(f"FAIL {version}: {exc}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
