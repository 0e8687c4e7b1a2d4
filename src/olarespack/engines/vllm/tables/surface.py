"""vLLM's option surface per release, read from the `vllm` wheels' Python sources (never imported) into
`releases/vllm-<minor>.json`: `olarespack releases refresh --engine vllm [VERSION ...]` (0.33: its newest patch;
0.33.0; none: every minor from 0.20 on), or `--wheel FILE.whl` for a wheel already on disk. Wheels are fetched
with `pip download` into the cache (wheels.py); only their sources are kept.
"""

from __future__ import annotations

import ast
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from olarespack.engines.release_files import cache_dir, write_json, written_by
from olarespack.engines.releases import RefreshRequest
from olarespack.engines.vllm.tables import wheels
from olarespack.engines.vllm.tables.args_source import (
    ConfigIndex,
    deprecations,
    engine_args,
    frontend_args,
    frontend_path,
)
from olarespack.engines.vllm.tables.pysource import (
    SourceError,
    SourceTree,
    assignments,
    class_fields,
    find_class,
    literal_values,
    unique,
)

FIRST_MINOR = (0, 20)
# beside the vLLM engine package, where lint reads them
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "releases"  # engines/<kind>/releases, where lint reads them
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
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"register_module", "register_lazy_module"}
                and ast.unparse(node.func.value).endswith(manager)
            ):
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
    facts["sources"] = {
        "arg_utils": "vllm/engine/arg_utils.py",
        "frontend": frontend_path(tree),
        "speculative": SPECULATIVE,
        "cache": CACHE,
        "attention": ATTENTION,
        "envs": ENVS,
    }
    facts["counts"] = counts(facts)
    return facts


def counts(facts: dict[str, Any]) -> dict[str, int]:
    spec = facts["speculative"]
    return {
        "engine_args": len(facts["engine_args"]),
        "frontend_args": len(facts["frontend_args"]),
        "deprecated_flags": len(facts["deprecated_flags"]),
        "speculative_methods": len(spec["methods"]),
        "speculative_keys": len(spec["keys"]),
        "kv_cache_dtypes": len(facts["kv_cache_dtypes"]),
        "attention_backends": len(facts["attention_backends"]),
        "tool_parsers": len(facts["tool_parsers"]),
        "reasoning_parsers": len(facts["reasoning_parsers"]),
        "env_vars": len(facts["env_vars"]),
    }


def release_doc(artifact: wheels.Artifact, tree: SourceTree, command: str) -> dict[str, Any]:
    document: dict[str, Any] = {
        "engine": "vllm",
        "artifact": {
            "file": artifact.file,
            "sha256": artifact.sha256,
            "size": artifact.size,
            "version": artifact.version,
        },
        "written_by": written_by(command),
    }
    document.update(extract(tree))
    return document


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def resolve(requested: list[str]) -> list[str]:
    """Exact versions as given; a bare minor (0.33) or nothing (every minor since 0.20) -> newest patch."""
    if requested and all(v.count(".") >= 2 for v in requested):
        return requested
    newest = wheels.newest_per_minor(wheels.available_versions("vllm"))
    if not requested:
        return sorted((v for m, v in newest.items() if wheels._key(m) >= FIRST_MINOR), key=wheels._key)
    missing = [v for v in requested if v.count(".") < 2 and v not in newest]
    if missing:
        raise wheels.FetchError(f"no vllm release on PyPI for {', '.join(missing)}")
    return [newest[v] if v.count(".") < 2 else v for v in requested]


def _wheel_version(path: Path) -> str:
    match = re.match(r"vllm-(\d+(?:\.\d+)+(?:\.post\d+)?)-", path.name)
    if not match:
        raise wheels.FetchError(f"{path}: not a vllm wheel name (vllm-<version>-...whl)")
    return match.group(1)


def refresh(
    versions: list[str],
    out: Path = DEFAULT_OUT,
    cache: Path | None = None,
    wheel_files: list[Path] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[list[Path], list[str]]:
    """Write the tables of the releases asked (or of the wheels given): the files written, the failures."""
    jobs: list[tuple[str, Path | None]]
    try:
        given: list[tuple[str, Path | None]] = [(_wheel_version(w), w) for w in wheel_files or ()]
        jobs = given or [(v, None) for v in resolve(versions)]
    except wheels.FetchError as exc:
        return [], [str(exc)]
    written: list[Path] = []
    failures: list[str] = []
    for version, wheel in jobs:
        target = out / f"vllm-{minor_of(version)}.json"
        command = f"olarespack releases refresh --engine vllm {version}"
        try:
            progress(f"reading vllm=={version}")
            if wheel is not None:
                with tempfile.TemporaryDirectory() as tmp:
                    sources, artifact = wheels.slim_wheel(wheel, Path(tmp), "vllm", version)
                    doc = release_doc(artifact, SourceTree.from_zip(sources), command)
            else:
                sources, artifact = wheels.fetch("vllm", version, cache or cache_dir())
                doc = release_doc(artifact, SourceTree.from_zip(sources), command)
            write_json(target, doc, indent=1)
            written.append(target)
        except (wheels.FetchError, SourceError, OSError, ValueError) as exc:
            failures.append(f"{version}: {exc}")
    return written, failures


def refresh_request(request: RefreshRequest, progress: Callable[[str], None]) -> tuple[list[Path], list[str]]:
    if request.boundaries or request.index:
        return [], ["--boundaries and --index-url are llama.cpp's; vLLM's wheels come through `pip download`"]
    return refresh(list(request.releases), request.out or DEFAULT_OUT, request.cache, list(request.wheels), progress)
