"""The shape of the source: folders import one another one way (no cycle between the folders of
src/olarespack), nothing outside engines/ branches on an engine's kind, and modules stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "olarespack"
KINDS = frozenset({"vllm", "llamacpp"})
ENGINE_SPECS = frozenset({"VllmEngine", "LlamaCppEngine"})
ENGINE_IMPORTERS = frozenset({"import_vllm", "import_llamacpp"})
MAX_LINES = 400


def _modules(root: Path) -> dict[str, ast.Module]:
    return {str(f.relative_to(root)): ast.parse(f.read_text(encoding="utf-8")) for f in sorted(root.rglob("*.py"))}


def _unit(module: str) -> str:
    """A folder of the package, or a loose module as its own unit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _typing_only(tree: ast.Module) -> set[int]:
    """The nodes under `if TYPE_CHECKING:`: imports for annotations, never run."""
    found: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            found |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return found


def folder_edges(root: Path) -> dict[str, dict[str, list[str]]]:
    """unit -> unit it imports -> the imports that make the edge: every import that runs, at module level or
    inside a function (a lazy import is an arrow all the same); only those under `if TYPE_CHECKING:` do not
    count, and cli/'s, whose lazy imports keep the command line's start-up fast (nothing imports cli/)."""
    edges: dict[str, dict[str, list[str]]] = {}
    package = root.name
    for path, tree in _modules(root).items():
        module = ".".join((package, *Path(path).with_suffix("").parts)).removesuffix(".__init__")
        source = _unit(module)
        typing_only = _typing_only(tree)
        nodes = tree.body if source == "cli" else [n for n in ast.walk(tree) if id(n) not in typing_only]
        for node in nodes:
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
                targets = [f"{package}.{a.name}" for a in node.names] if node.module == package else [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == package]
            for target in targets:
                unit = _unit(target)
                if unit not in (source, package):
                    edges.setdefault(source, {}).setdefault(unit, []).append(f"{module} -> {target}")
    return edges


def knots(root: Path) -> list[list[str]]:
    """The import cycles between units (strongly connected components of more than one unit)."""
    edges = folder_edges(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in edges.get(unit, {}):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(set(edges) | {u for targets in edges.values() for u in targets}):
        if unit not in index:
            visit(unit)
    return found


def _is_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "kind") or (
        isinstance(node, ast.Name) and node.id == "kind"
    )


def _names_a_kind(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and any(_names_a_kind(e) for e in node.elts)


def kind_branches(root: Path) -> list[str]:
    """Where code outside engines/ knows an engine by name: a kind compared with an engine's, a dict keyed by
    kinds, an engine's importer, isinstance against an engine's spec class."""
    found = []
    for path, tree in _modules(root).items():
        if Path(path).parts[0] == "engines":
            continue
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_kind(s) for s in sides) and any(_names_a_kind(s) for s in sides):
                    found.append(f"{where}: a kind compared with an engine's")
            elif isinstance(node, ast.Dict) and any(_names_a_kind(key) for key in node.keys):
                found.append(f"{where}: a dict keyed by engine kinds")
            elif isinstance(node, ast.alias) and node.name in ENGINE_IMPORTERS | ENGINE_SPECS:
                found.append(f"{where}: imports {node.name}")
            elif isinstance(node, ast.Name) and node.id in ENGINE_IMPORTERS:
                found.append(f"{where}: calls {node.id}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
                and any(getattr(n, "id", getattr(n, "attr", None)) in ENGINE_SPECS for n in ast.walk(node.args[1]))
            ):
                found.append(f"{where}: isinstance against an engine's spec class")
    return found


def engine_packages(root: Path) -> set[str]:
    """Every engine package (a folder of engines/ with an engine.py), found on disk rather than named, so a new
    engine is covered without touching this test."""
    return {p.parent.name for p in (root / "engines").glob("*/engine.py")}


def engine_package_imports(root: Path) -> list[str]:
    """Where code outside engines/ imports an engine's own package (its log reader, its spec model, ...): what
    a command needs of an engine goes through the engine protocol, so a new engine needs no edit there."""
    packages = {f"olarespack.engines.{name}" for name in engine_packages(root)}
    found = []
    for path, tree in _modules(root).items():
        if Path(path).parts[0] == "engines":
            continue
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if any(name == package or name.startswith(f"{package}.") for package in packages):
                    found.append(f"{path}:{node.lineno}: imports {name}")
    return found


def long_modules(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(root)}: {lines} lines (at most {MAX_LINES})")
    return found


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "olarespack"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


# --------------------------------------------------------------------------------------- the real source


# The floors, lowest first: a unit imports its own floor or the ones below, never one above (a lazy import too).
# The run wing (smoke, bench: what starts an engine or talks to one) sits just under cli/.
FLOORS: list[set[str]] = [
    {"core", "__version__"},
    {"write", "helm", "helm_install", "olares", "models"},
    {"engines"},
    {"spec", "config"},
    {"fit"},
    {"render", "package"},
    {"project"},
    {"check"},
    {"importer"},
    {"release", "plan"},
    {"market"},
    {"smoke", "bench"},
    {"cli"},
]


def climbing(root: Path, floors: list[set[str]]) -> list[str]:
    """Each import that climbs a floor, and each unit no floor names."""
    level = {unit: at for at, units in enumerate(floors) for unit in units}
    edges = folder_edges(root)
    units = set(edges) | {unit for targets in edges.values() for unit in targets}
    found = [f"{unit}: on no floor" for unit in sorted(units - set(level))]
    for source, targets in sorted(edges.items()):
        for target, why in sorted(targets.items()):
            if source in level and target in level and level[target] > level[source]:
                found.append(f"{source} -> {target} climbs: {why[0]}")
    return found


def test_no_import_climbs_a_floor() -> None:
    assert climbing(SOURCE, FLOORS) == []


def test_a_climbing_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "render/__init__.py": "",
            "bench/__init__.py": "",
            "render/texts.py": "def cite():\n    from olarespack.bench.record import newest\n",
        },
    )
    assert climbing(root, [{"render"}, {"bench"}]) == [
        "render -> bench climbs: olarespack.render.texts -> olarespack.bench.record"
    ]


def test_no_folder_import_cycle() -> None:
    assert knots(SOURCE) == [], {unit: folder_edges(SOURCE).get(unit) for knot in knots(SOURCE) for unit in knot}


def test_nothing_outside_engines_branches_on_an_engine_kind() -> None:
    assert kind_branches(SOURCE) == []


def test_nothing_outside_engines_imports_an_engine_package() -> None:
    assert engine_packages(SOURCE) >= KINDS
    assert engine_package_imports(SOURCE) == []


def test_an_engine_package_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "engines/newengine/engine.py": "",
            "cli/x.py": "from olarespack.engines.newengine.log import NewLog\n",
            "cli/y.py": "import olarespack.engines.newengine\n",
            "cli/z.py": "from olarespack.engines import engine_for\n",
        },
    )
    assert [line.split(": ", 1)[1] for line in engine_package_imports(root)] == [
        "imports olarespack.engines.newengine.log",
        "imports olarespack.engines.newengine",
    ]


def test_modules_stay_small() -> None:
    assert long_modules(SOURCE) == []


def test_every_engine_is_a_package_behind_the_protocol() -> None:
    from olarespack.engines import ENGINES
    from olarespack.engines.protocol import Engine

    for kind, engine in ENGINES.items():
        assert isinstance(engine, Engine)
        assert (SOURCE / "engines" / kind / "__init__.py").is_file()
        assert type(engine).__module__.startswith(f"olarespack.engines.{kind}.")


def test_every_engine_declares_its_bench_smoke_and_release_rules_on_its_class() -> None:
    """What bench, smoke and lint need of an engine is declared by the engine class (abstract on the protocol),
    not found by module name: an engine without one cannot be built, and each one is the right type."""
    from olarespack.engines import ENGINES
    from olarespack.engines.base import EngineBench
    from olarespack.engines.protocol import EngineBase
    from olarespack.engines.releases import ReleaseRules, refresh_command, tables
    from olarespack.engines.smoke import EngineSmoke

    assert {"bench", "smoke", "release_rules"} <= EngineBase.__abstractmethods__
    for kind, engine in ENGINES.items():
        assert isinstance(engine.bench(), EngineBench) and isinstance(engine.smoke(), EngineSmoke)
        rules = engine.release_rules()
        assert isinstance(rules, ReleaseRules)
        assert tables(kind) and all(table.kind == kind for table in tables(kind))
        assert refresh_command(kind, tables(kind)[-1].release).startswith("olarespack releases refresh --engine")


# --------------------------------------------------------------------------------------- the checks catch


def test_a_folder_cycle_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "fit/__init__.py": "",
            "engines/__init__.py": "",
            "fit/budget.py": "from olarespack.engines import engine_for\n",
            "engines/vllm.py": "from olarespack.fit.report import FitReport\n",
            "cli.py": "def f():\n    from olarespack.cli import x  # lazy: no edge\n",
        },
    )
    assert knots(root) == [["engines", "fit"]]
    # a lazy import is an arrow all the same (it hid a 9-folder knot): only an annotation's import is not
    (root / "engines/vllm.py").write_text("def fit():\n    from olarespack.fit.report import FitReport\n")
    assert knots(root) == [["engines", "fit"]]
    (root / "engines/vllm.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from olarespack.fit.report import FitReport\n"
    )
    assert knots(root) == []


def test_a_loose_module_counts_as_its_own_unit(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "package.py": "from olarespack.market import x\n",
            "market/__init__.py": "from olarespack import package\n",
        },
    )
    assert knots(root) == [["market", "package"]]


@pytest.mark.parametrize(
    "code",
    [
        'if spec.engine.kind == "vllm":\n    pass\n',
        'gguf = engine.kind in ("llamacpp",)\n',
        'TITLES = {"vllm": "vLLM", "llamacpp": "llama.cpp"}\n',
        "from olarespack.engines.vllm.importer import import_vllm\n",
        "ok = isinstance(spec.engine, LlamaCppEngine)\n",
    ],
)
def test_an_engine_kind_branch_is_found(tmp_path: Path, code: str) -> None:
    root = _tree(tmp_path, {"cli/calibrate.py": code, "engines/vllm.py": code})
    assert [line.split(":", 1)[0] for line in kind_branches(root)] == ["cli/calibrate.py"]


def test_a_long_module_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"engines/llamacpp.py": "x = 1\n" * 401, "models/arch.py": "x = 1\n" * 400})
    assert long_modules(root) == ["engines/llamacpp.py: 401 lines (at most 400)"]


def test_an_engine_binds_only_its_own_spec_and_is_found_by_its_command() -> None:
    from olarespack.engines import ENGINES, engine_for, engine_of_command
    from olarespack.spec.load import load_spec

    apps = Path(__file__).resolve().parents[1] / "apps"
    vllm, llamacpp = (load_spec(apps / name).engine for name in ("gemma4-vision.yaml", "gemma4-audio.yaml"))
    assert ENGINES["llamacpp"].bind(vllm) is None and ENGINES["vllm"].bind(llamacpp) is None
    assert (engine_for(vllm).title, engine_for(llamacpp).title) == ("vLLM", "llama.cpp")
    assert engine_for(vllm).model_files() is None and engine_for(llamacpp).model_files()
    found = [
        engine_of_command(argv, "example.org/custom:1")
        for argv in (
            ["/usr/bin/llama-server", "-m", "x"],
            ["vllm", "serve", "m"],
            ["python3", "-m", "vllm.entrypoints.openai.api_server"],
            ["sh", "-c", "x"],
        )
    ]
    assert [e.kind if e else None for e in found] == ["llamacpp", "vllm", "vllm", None]
