"""Maintainer check: parse every vLLM app's server command line with the real `vllm serve` argument parser of
its release, and of a newer release the app could move to, and write what each said
(src/olarespack/engines/vllm/releases/argv-check.json).

The command line is the one the pod runs: the chart rendered in memory, templated by the real helm with the
values Olares injects, and its $(SPEC_CONFIG)-style references expanded from the container's env (the
importer's own reader). The parser is built as `vllm serve` builds it (FlexibleArgumentParser, the serve
subcommand, make_arg_parser with EngineArgs' and the frontend's flags), from the release wheel's sources,
then the serve subcommand's own validation, EngineArgs.from_cli_args, and the --speculative-config JSON
checked key by key against SpeculativeConfig's typed fields. create_engine_config is not run: it reads the
model's config from Hugging Face.

Two interpreters: this file runs under the project's venv (it renders), and each release's parser runs in a
child under an interpreter with CPU torch and the few packages vLLM's serve modules import; never the
project's .venv. For example:

    python3 -m venv /tmp/vargv && /tmp/vargv/bin/pip install torch==2.13.0 <vllm_kv_check.py's packages> \
        fastapi openai transformers uvicorn watchfiles orjson ijson mistral_common \
        model_hosting_container_standards                              # what vLLM's serve modules import
    olarespack releases refresh --engine vllm --out /tmp/x 0.33       # fills the wheel-source cache
    .venv/bin/python tools/engine_releases/vllm_argv_check.py --python /tmp/vargv/bin/python

vLLM picks its platform from the machine (CUDA through NVML, else CPU builds, ...); with no GPU it finds none
and its DeviceConfig refuses to start. The child installs a stand-in CUDA platform first: the interface's
defaults, CUDA's names and an sm_120 capability (the RTX 5090 laptop's), no kernel or driver loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from wheel_cache import DEFAULT_CACHE  # noqa: E402

OUT = ROOT / "src" / "olarespack" / "engines" / "vllm" / "releases" / "argv-check.json"
MOVED_IMAGE = "vllm/vllm-openai:v0.33.0"
# a flag 0.33 no longer has: the check must be able to fail, and this shows it does
CONTROL_FLAG = "--calculate-kv-scales"
BAD_METHOD, BAD_KEY = "no_such_method", "no_such_key"
CHILD_TIMEOUT = 600


# ---- parent: render each app, as it is and moved, and read the command line its pod runs ----


def moved_text(text: str, image: str) -> str:
    """The spec moved to `image`: engine.version (the release of a tag that names none) and a calibration
    measured on the old image no longer apply, so both go."""
    import yaml

    data = yaml.safe_load(text)
    engine = data["engine"]
    engine["image"] = image
    engine.pop("version", None)
    engine.pop("calibration", None)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def release_of(spec: Any) -> tuple[str, str, str]:
    """(the release the image says, its table's release, the wheel version that table was read from)."""
    from olarespack.engines.releases import image_release

    match = image_release(spec.engine)
    if match.facts is None:
        raise SystemExit(f"{spec.name}: {match.note}")
    table = OUT.parent / f"vllm-{match.facts.release}.json"
    return str(match.asked), match.facts.release, json.loads(table.read_text())["artifact"]["version"]


def rendered_case(label: str, text: str) -> dict[str, Any]:
    """Render a spec text in memory, as build does, and read its server's command line through helm. What
    olarespack itself refuses is recorded beside the command line (a move lint would stop, say), which is
    still rendered and parsed: the parser's answer does not depend on it."""
    from olarespack.check.inputs import Target
    from olarespack.fit.budget import resolve_context
    from olarespack.helm import HelmBinary
    from olarespack.importer import server_command_line
    from olarespack.project import check_app
    from olarespack.render import render_chart
    from olarespack.spec.load import load_spec

    with tempfile.TemporaryDirectory(prefix="vllm-argv-") as tmp:
        spec_file = Path(tmp) / "spec.yaml"
        spec_file.write_text(text, encoding="utf-8")
        spec, found = resolve_context(label, load_spec(spec_file))
        chart = render_chart(spec, label)
        refused = [p for p in found + check_app(label, spec, [chart]) if p.severity == "error"]
        folder = Path(tmp) / chart.name
        for path, body in chart.files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(body, encoding="utf-8")
        kind, argv, unresolved = server_command_line(Target(chart, folder), HelmBinary())
    if kind != "vllm" or argv[:2] != ["vllm", "serve"] or unresolved:
        raise SystemExit(f"{label}: not a `vllm serve` command line: {argv[:3]} {unresolved}")
    asked, release, wheel = release_of(spec)
    return {
        "image": spec.engine.image,
        "release": asked,
        "table": release,
        "wheel": wheel,
        "argv": argv[2:],
        "olarespack_refuses": [f"{p.path}: {p.message}" for p in refused],
    }


def app_cases(apps_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """app name -> "own" / "moved" -> the rendered case, for every vLLM spec of the folder."""
    from olarespack.spec.load import load_spec

    cases: dict[str, dict[str, dict[str, Any]]] = {}
    for path in sorted(apps_dir.glob("*.yaml")):
        spec = load_spec(path)
        if spec.engine.kind != "vllm":
            continue
        label = f"apps/{path.name}"
        text = path.read_text(encoding="utf-8")
        cases[spec.name] = {
            "own": dict(rendered_case(label, text), spec=label),
            "moved": dict(rendered_case(label, moved_text(text, MOVED_IMAGE)), spec=label),
        }
    return cases


def run_release(wheel: str, argvs: dict[str, list[str]], python: str, cache: Path) -> dict[str, Any]:
    """Every argv parsed by one release's parser, in a child with that release's sources first."""
    import zipfile

    zipped, meta = cache / f"vllm-{wheel}.sources.zip", cache / f"vllm-{wheel}.artifact.json"
    if not zipped.is_file():
        raise SystemExit(
            f"{zipped} is missing: run olarespack releases refresh --engine vllm --out /tmp/x "
            f"{'.'.join(wheel.split('.')[:2])} first"
        )
    with tempfile.TemporaryDirectory(prefix="vllm-src-") as tmp:
        with zipfile.ZipFile(zipped) as archive:
            archive.extractall(tmp)
        answer = Path(tmp) / "answer.json"
        # HOME in the scratch folder, so nothing is cached; Hugging Face at a closed loopback port, so nothing
        # is fetched (not HF_HUB_OFFLINE: with it, EngineArgs swaps the model id for a local snapshot's path)
        env = {
            "PYTHONPATH": tmp,
            "PATH": "/usr/bin:/bin",
            "HOME": tmp,
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_LOGGING_LEVEL": "WARNING",
        }
        done = subprocess.run(
            [python, __file__, "--child", str(answer)],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            check=False,
            timeout=CHILD_TIMEOUT,
        )
        if done.returncode or not answer.is_file():
            raise SystemExit(f"vLLM {wheel}: the child failed: {done.stderr.strip()[-3000:]}")
        results: dict[str, Any] = json.loads(answer.read_text())
    return {"artifact": json.loads(meta.read_text()), "results": results}


def controls(argv: list[str]) -> dict[str, list[str]]:
    """Argvs the check must refuse, so that its "ok" means something: the app's own with a flag 0.33 removed
    added, and with a --speculative-config whose method and one key no release has."""
    found = {"removed_flag": [*argv, CONTROL_FLAG]}
    if "--speculative-config" in argv:
        at = argv.index("--speculative-config") + 1
        broken = dict(json.loads(argv[at]), method=BAD_METHOD, **{BAD_KEY: 1})
        found["bad_speculative"] = [*argv[:at], json.dumps(broken), *argv[at + 1 :]]
    return found


def check(apps_dir: Path, python: str, cache: Path) -> dict[str, Any]:
    cases = app_cases(apps_dir)
    by_wheel: dict[str, dict[str, list[str]]] = {}
    for name, pair in cases.items():
        for which, case in pair.items():
            argvs = by_wheel.setdefault(case["wheel"], {})
            argvs[f"{name}/{which}"] = case["argv"]
            argvs.update({f"{name}/{which}/{control}": wrong for control, wrong in controls(case["argv"]).items()})
    releases = {wheel: run_release(wheel, argvs, python, cache) for wheel, argvs in sorted(by_wheel.items())}
    apps: dict[str, Any] = {}
    for name, pair in cases.items():
        apps[name] = {}
        for which, case in pair.items():
            said = releases[case["wheel"]]["results"]
            apps[name][which] = dict(
                case,
                **said[f"{name}/{which}"],
                controls={control: said[f"{name}/{which}/{control}"] for control in controls(case["argv"])},
            )
    return {
        "moved_image": MOVED_IMAGE,
        "control_flag": CONTROL_FLAG,
        "artifacts": {wheel: found["artifact"] for wheel, found in releases.items()},
        "apps": apps,
    }


# ---- child: one release's parser, from its own sources ----


def install_stand_in_platform() -> None:
    """A CUDA platform that loads nothing: vLLM's parser and EngineArgs ask the platform for the device
    type (and a few defaults); without a GPU vLLM would find no platform at all."""
    import vllm.platforms as platforms
    from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

    class StandInCudaPlatform(Platform):  # type: ignore[misc]  # vLLM has no stubs here (its own venv)
        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        dist_backend = "nccl"

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(12, 0)

    platforms.current_platform = StandInCudaPlatform()


def serve_parser() -> tuple[Any, Any]:
    """(the `vllm` parser with its serve subcommand, the subcommand), as vllm/entrypoints/cli/main.py
    builds them."""
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    command = serve.ServeSubcommand()
    command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
    return parser, command


class _Warnings(logging.Handler):
    """vLLM's warnings while one argv is read (a `warning_once` is said only the first time in a run)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())


def speculative_problems(config: Any) -> list[str]:
    """Each key of the --speculative-config JSON against SpeculativeConfig's field of that name and type
    (the field's own pydantic validation; SpeculativeConfig itself needs the target model's config)."""
    from pydantic import TypeAdapter, ValidationError
    from vllm.config import SpeculativeConfig

    fields = SpeculativeConfig.__pydantic_fields__
    problems = []
    for key, value in (config or {}).items():
        if key not in fields:
            problems.append(f"{key}: not a field of SpeculativeConfig")
            continue
        try:
            TypeAdapter(fields[key].annotation).validate_python(value)
        except ValidationError as exc:
            said = exc.errors()[0]["msg"]  # a Literal's message lists every method: the start says enough
            problems.append(f"{key}: {said if len(said) <= 120 else said[:117] + '...'} (given {value!r})")
    return problems


def parse_one(parser: Any, command: Any, argv: list[str]) -> dict[str, Any]:
    """What the release says of one argv: the parser's and serve's verdict, then EngineArgs'."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    heard = _Warnings()
    logging.getLogger("vllm").addHandler(heard)
    said = io.StringIO()
    result: dict[str, Any] = {}
    try:
        with contextlib.redirect_stderr(said):
            try:
                args = parser.parse_args(["serve", *argv])
                command.validate(args)
            except SystemExit:
                lines = said.getvalue().strip().splitlines()
                return dict(parser="error", error=lines[-1] if lines else "exited", warnings=heard.said)
            except (ValueError, TypeError) as exc:
                return dict(parser="error", error=f"{type(exc).__name__}: {exc}", warnings=heard.said)
        result["parser"] = "ok"
        result["model"] = args.model_tag
        if args.model_tag is not None:  # as ServeSubcommand.cmd does
            args.model = args.model_tag
        try:
            engine_args = AsyncEngineArgs.from_cli_args(args)
            result["engine_args"] = "ok"
            result["speculative_config"] = speculative_problems(engine_args.speculative_config) or "ok"
        except Exception as exc:  # whatever vLLM raises is the finding, recorded as it said it
            result["engine_args"] = f"{type(exc).__name__}: {exc}"
        result["warnings"] = heard.said
        return result
    finally:
        logging.getLogger("vllm").removeHandler(heard)


def child(answer: Path) -> int:
    argvs: dict[str, list[str]] = json.load(sys.stdin)
    sys.argv = ["vllm"]  # serve's modules read the real argv at import
    install_stand_in_platform()
    parser, command = serve_parser()
    answer.write_text(json.dumps({key: parse_one(parser, command, argv) for key, argv in argvs.items()}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--python", help="an interpreter with CPU torch and vLLM's serve imports (not .venv)")
    parser.add_argument("--apps-dir", type=Path, default=ROOT / "apps")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    if not args.python:
        parser.error("--python is required: the interpreter the parsers run in")
    found = check(args.apps_dir, args.python, args.cache)
    args.out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    for name, pair in found["apps"].items():
        for which, case in pair.items():
            refused = ", ".join(
                f"{control} {said['parser']}/{said.get('speculative_config', '-')}"
                for control, said in case["controls"].items()
            )
            print(
                f"{name} {which} (vLLM {case['wheel']}): parser {case['parser']}, engine args "
                f"{case.get('engine_args', '-')}, speculative {case.get('speculative_config', '-')}; "
                f"controls: {refused}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
