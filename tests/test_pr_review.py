"""Pull-request review: the markdown of `olarespack diff` (pods first, each setting change once, small), the
composite action (its structure, its scripts run with a fake `gh`), and actionlint on the workflows and on the
action's steps embedded in a throwaway workflow."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ROOT, git
from olarespack.release.diff import AppDiff, ResourceChange, as_markdown
from test_pr_comment_text import RENDERER, hostile_diffs, pr_markup, walk
from test_release import V_VISION, VISION, replace_in, run

ACTION = ROOT / "action.yml"
WORKFLOWS = sorted([*ROOT.glob("templates/init/*.yml"), *ROOT.glob(".github/workflows/*.yml")])
MARKER = "<!-- olarespack-pr-review -->"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def script(name: str) -> str:
    [step] = [s for s in action()["runs"]["steps"] if s.get("name") == name]
    return str(step["run"])


def actionlint() -> str:
    found = shutil.which("actionlint", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if not found:
        pytest.skip("actionlint is not installed: `pip install -e '.[dev]'` (make test) installs it")
    return found


# --------------------------------------------------------------------------- the markdown


@pytest.mark.helm
def test_a_one_line_context_change_is_a_small_comment_with_the_pods_first(repo: Path) -> None:
    replace_in(repo / "apps/gemma4-vision.yaml", "max_model_len: 131072", "max_model_len: 163840")
    code, out, _ = run("diff", "--format", "markdown")
    assert code == 1  # the version gate: not raised
    # 9806 bytes and 134 lines before: the 600-character engine-args line three times, the Deployment last
    assert len(out.encode()) < 3000 and len(out.splitlines()) < 60, len(out.encode())
    assert out.startswith(f"### `{VISION}` {V_VISION} -> {V_VISION} **(version not raised)**\n")
    box = out.splitlines()[2]
    assert box.startswith(f"A box on {V_VISION} is offered **no upgrade**") and "Context 128K -> 160K" in box
    assert out.index("#### Pods") < out.index("#### Chart files and store listing")
    assert out.count("--max-model-len 131072 -> 163840") == 1  # the setting, stated once
    assert max(len(line) for line in out.splitlines()) < 300  # no 600-character engine-args line
    assert "(same change as above)" in out  # the long engine-args line: only its changed span, both sides
    # the store description's claim beside the new context is in view, and flagged as bump flags it
    assert "decoding via vLLM, 250 t/s at 128K context" in out and "decoding via vLLM, 250 t/s at 160K context" in out
    [check] = [line for line in out.splitlines() if line.startswith("> **Check:**")]  # one for the three files
    assert "250 t/s stays beside a changed setting (128K -> 160K)" in check and "i18n/fr-FR" in check
    files = out.split("#### Chart files and store listing")[1]
    assert files.lstrip().startswith("<details>") and "Chart.yaml, OlaresManifest.yaml" in files
    assert run("diff", "--format", "markdown")[1] == out  # deterministic


@pytest.mark.helm
def test_json_values_are_diffed_per_key_and_resources_per_field(repo: Path) -> None:
    spec = repo / "apps/gemma4-vision.yaml"
    replace_in(spec, "num_speculative_tokens: 3", "num_speculative_tokens: 4")
    replace_in(spec, "    image: 1\n", "    image: 2\n")
    replace_in(spec, "memory: {request: 24Gi, limit: 40Gi}", "memory: {request: 24Gi, limit: 48Gi}")
    out = run("diff", "--format", "markdown")[1]
    pods = out.split("#### Pods")[1].split("<details>")[0]
    assert "`env SPEC_CONFIG.num_speculative_tokens 3 -> 4`" in pods
    assert "`--limit-mm-per-prompt.image 1 -> 2`" in pods
    assert "`resources.limits.memory 40Gi -> 48Gi`" in pods
    assert "SPEC_CONFIG.method" not in pods and "SPEC_CONFIG.model" not in pods  # only the key that changed


def deployment(args: list[str], image: str = "vllm/vllm-openai:v0.21.0-cu129") -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {"template": {"spec": {"containers": [{"name": "vllm", "image": image, "args": args}]}}},
    }


def markdown(old: dict[str, Any], new: dict[str, Any], *files: ResourceChange, version: str = "1.0.1") -> str:
    change = ResourceChange("Deployment/app", "changed", ("-a", "+b"), old, new)
    return as_markdown([AppDiff("app", "apps/app.yaml", "1.0.0", version, (*files, change))])


def test_arguments_are_compared_one_by_one() -> None:
    old = deployment(["org/model", "--lora-modules", "a=x", "--lora-modules", "b=y", "--enforce-eager", "--seed", "-1"])
    new = deployment(
        ["org/model-2", "--lora-modules", "a=x", "--lora-modules", "b=z", "--seed", "-1", "--trust-remote-code"],
        image="vllm/vllm-openai:v0.22.0",
    )
    out = markdown(old, new)
    assert "`argument 1 org/model -> org/model-2`" in out
    assert "`--lora-modules #2 b=y -> b=z`" in out and "`--lora-modules a=x" not in out
    assert "`drop --enforce-eager`" in out and "`add --trust-remote-code`" in out
    assert "`image vllm/vllm-openai:v0.21.0-cu129 -> vllm/vllm-openai:v0.22.0`" in out
    assert "--seed" not in out.split("<details>")[0]  # "-1" is the value of --seed, not a flag
    assert out.index("### `app` 1.0.0 -> 1.0.1") < out.index("A box on 1.0.0 is offered 1.0.1:") < out.index("Pods")
    reordered = markdown(deployment(["--a", "1", "--b", "2"]), deployment(["--b", "2", "--a", "1"]))
    assert "`argument order --a --b -> --b --a`" in reordered


def test_chart_files_repeat_a_line_once_and_name_a_long_restating_line() -> None:
    args = "--served-model-name m --host 0.0.0.0 --port 8000 --max-model-len {} " + "--flag value " * 40
    long_old, long_new = f"- Engine args: `{args.format(8192)}`", f"- Engine args: `{args.format(16384)}`"
    files = [
        ResourceChange(
            name,
            "changed",
            (
                "@@ -1,3 +1,3 @@",
                " a",
                f"-  {long_old}",
                f"+  {long_new}",
                "-  context 8192 tokens",
                "+  context 16384 tokens",
            ),
        )
        for name in ("OlaresManifest.yaml", "i18n/en-US/OlaresManifest.yaml")
    ]
    out = markdown(deployment(["m", "--max-model-len", "8192"]), deployment(["m", "--max-model-len", "16384"]), *files)
    block = out.split("#### Chart files and store listing")[1]
    assert block.count("@@ OlaresManifest.yaml, i18n/en-US/OlaresManifest.yaml @@") == 1
    assert block.count("context 8192 tokens") == 1  # the same line in two files, once
    assert max(len(line) for line in block.splitlines()) < 200  # the 600-character line is not shown whole
    assert "--max-model-len 8192" in block and "--max-model-len 16384" in block  # its change is
    assert "(same change as above)" in block


def test_a_new_app_and_an_unchanged_one() -> None:
    assert as_markdown([AppDiff("app", "apps/app.yaml", "1.0.0", "1.0.0")]) == "No rendered change.\n"
    new = ResourceChange("Deployment/app", "added", ("+x",), None, deployment(["m"]))
    out = as_markdown([AppDiff("app", "apps/app.yaml", None, "1.0.0", (new,))])
    assert "New app: a box can install 1.0.0." in out and "<code>Deployment/app</code> added" in out


# --------------------------------------------------------------------------- the action's structure


def test_the_action_is_a_composite_whose_scripts_are_bash_and_whose_actions_are_pinned() -> None:
    spec = action()
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(spec)
    assert spec["runs"]["using"] == "composite"
    for name, item in {**spec["inputs"], **spec["outputs"]}.items():
        assert item.get("description"), name
    ids = {step.get("id") for step in spec["runs"]["steps"]}
    for name, output in spec["outputs"].items():
        [step_id] = re.findall(r"steps\.([\w-]+)\.outputs\.", output["value"])
        assert step_id in ids, name
    for step in spec["runs"]["steps"]:
        assert ("uses" in step) != ("run" in step), step.get("name")
        if "uses" in step:
            assert SHA_PIN.match(step["uses"]), f"{step['uses']}: pin by full commit SHA"
        else:
            assert step.get("shell") == "bash", f"{step.get('name')}: composite run steps need shell: bash"
            assert "${{" not in step["run"], f"{step.get('name')}: pass expressions through env, not into the script"
    # olarespack and helm come from the action's own checkout, with the project's installer
    install = script("Install olarespack and its pinned helm")
    assert 'pip install --quiet "$ACTION_PATH"' in install and '"$ACTION_PATH/tools/install_helm.py"' in install
    assert (ROOT / "tools/install_helm.py").is_file()
    checks = script("Drift check, lint and version gate")
    assert "olarespack build --check" in checks and "olarespack lint" in checks
    assert 'olarespack diff --base "$BASE" --format markdown' in checks


def test_the_example_workflow_asks_for_what_the_comment_needs_and_no_more() -> None:
    workflow = yaml.safe_load((ROOT / "templates/init/olarespack-pr.yml").read_text(encoding="utf-8"))
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    steps = workflow["jobs"]["review"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0 and SHA_PIN.match(steps[0]["uses"])
    assert steps[-1]["uses"].split("@")[0].endswith("/olarespack")


# --------------------------------------------------------------------------- actionlint


def test_workflows_pass_actionlint() -> None:
    binary = actionlint()
    assert WORKFLOWS, "no workflow to check"
    out = subprocess.run([binary, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_actions_steps_pass_actionlint_inside_a_workflow(tmp_path: Path) -> None:
    """actionlint reads workflows, not composite actions: the action's steps go into a reusable workflow whose
    inputs are the action's, so actionlint checks their expressions and (with shellcheck on PATH) scripts."""
    binary = actionlint()
    spec = action()
    inputs = {name: {"type": "string", "required": False} for name in spec["inputs"]}
    workflow = {
        "name": "embedded action",
        "on": {"workflow_call": {"inputs": inputs}},
        "permissions": {"contents": "read", "pull-requests": "write"},
        "jobs": {"review": {"runs-on": "ubuntu-latest", "steps": spec["runs"]["steps"]}},
    }
    target = tmp_path / ".github/workflows/embedded.yml"
    target.parent.mkdir(parents=True)
    target.write_text(yaml.safe_dump(workflow, sort_keys=False), encoding="utf-8")
    out = subprocess.run([binary, "-no-color", str(target)], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    if shutil.which("shellcheck"):  # actionlint ran it on every run: script; show it found nothing to say
        for step in spec["runs"]["steps"]:
            if "run" in step:
                checked = subprocess.run(
                    ["shellcheck", "-s", "bash", "-"], input=step["run"], text=True, capture_output=True, check=False
                )
                assert checked.returncode == 0, f"{step['name']}: {checked.stdout}"


# --------------------------------------------------------------------------- the action's scripts, run


FAKE_GH = '''#!{python}
"""gh api, as the action calls it, on a JSON file of comments; --jq runs the real jq."""
import json, subprocess, sys
state_file, log_file = {state!r}, {log!r}
args = sys.argv[1:]
comments = json.load(open(state_file))
open(log_file, "a").write(json.dumps(args) + "\\n")
assert args[0] == "api"
method = args[args.index("--method") + 1] if "--method" in args else "GET"
path = next(a for a in args[1:] if a.startswith("repos/"))
if method == "GET":
    jq = args[args.index("--jq") + 1]
    print(subprocess.run(["jq", "-r", jq], input=json.dumps(comments), text=True, capture_output=True,
                         check=True).stdout, end="")
    sys.exit(0)
body = open(args[args.index("-F") + 1].split("=@", 1)[1]).read()
if method == "PATCH":
    cid = int(path.rsplit("/", 1)[1])
    [comment] = [c for c in comments if c["id"] == cid]
    comment["body"] = body
else:
    comments.append({{"id": 100 + len(comments), "user": {{"login": "github-actions[bot]"}}, "body": body}})
json.dump(comments, open(state_file, "w"))
'''


def bash(text: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", text], env={**os.environ, **env}, cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.fixture
def runner(tmp_path: Path) -> dict[str, str]:
    """A runner's temp folder, step output files, and a fake gh first on PATH."""
    bin_dir, temp = tmp_path / "bin", tmp_path / "runner-temp"
    bin_dir.mkdir()
    (temp / "olarespack-review").mkdir(parents=True)
    state, log = tmp_path / "comments.json", tmp_path / "gh.log"
    state.write_text("[]")
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable, state=str(state), log=str(log)))
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(temp),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "STATE": str(state),
        "LOG": str(log),
    }


RUN_URL = "https://github.example/o/r/actions/runs/1"
LINT_SAID = "ok apps/a.yaml\nERROR apps/b.yaml: engine.x: bad [rule]\nFAIL apps/b.yaml: 1\n"


def write_review(
    runner: dict[str, str], tmp_path: Path, diff: str, said: dict[str, str] | None = None, **verdicts: str
) -> str:
    """The review as the action writes it: diff.md, what each check said (lint's by default), verdicts."""
    out = Path(runner["RUNNER_TEMP"]) / "olarespack-review"
    (out / "diff.md").write_text(diff)
    for name, text in (said or {"lint": LINT_SAID}).items():
        (out / f"{name}.txt").write_text(text, newline="")
    env = {**runner, "DRIFT": "pass", "LINT": "pass", "GATE": "pass", **verdicts, "RUN_URL": RUN_URL}
    result = bash(script("Write the review"), env, tmp_path)
    assert result.returncode == 0, result.stderr
    return (out / "comment.md").read_text()


def test_the_review_leads_with_the_marker_and_shows_what_failed(runner: dict[str, str], tmp_path: Path) -> None:
    comment = write_review(runner, tmp_path, "### `app` 1.0.0 -> 1.0.1\n", LINT="fail")
    assert comment.startswith(f"{MARKER}\n## olarespack\n")
    assert "| `olarespack lint` | **failed** |" in comment
    assert "| drift: `olarespack build --check` | passed |" in comment
    assert "ERROR apps/b.yaml" in comment and "ok apps/a.yaml" not in comment  # only what it had to say
    assert "### `app` 1.0.0 -> 1.0.1" in comment
    assert Path(runner["GITHUB_STEP_SUMMARY"]).read_text() == comment
    huge = write_review(runner, tmp_path, "x" * 60000)
    assert "too long for a comment" in huge and "xxxx" not in huge


# what a check can quote from the pull request's files: markup, fences of both kinds, a table, bare CRs
QUOTED = (
    "ERROR apps/x.yaml: engine.extra_args[0]: [APPROVED by maintainers](https://evil.example) "
    "![x](https://evil.example/p.png)\n</details>\n<!--\n<img src=x>\nhttps://evil.example @alice\n"
    "~~~~~~~~~\n```\n| a | b |\n|---|---|\nline\r</details>\r<!--\n"
)


def test_the_review_shows_what_the_checks_said_and_the_diff_as_text(runner: dict[str, str], tmp_path: Path) -> None:
    said = {name: f"{name} said:\n{QUOTED}" for name in ("drift", "lint", "gate")}
    comment = write_review(runner, tmp_path, as_markdown(hostile_diffs()), said, DRIFT="fail", LINT="fail", GATE="fail")
    assert (found := pr_markup(comment, own_links=(RUN_URL,))) == [], "\n".join(found)
    tokens = RENDERER.parse(comment)
    assert tokens[0].type == "html_block" and tokens[0].content == f"{MARKER}\n"  # the marker stays hidden
    assert [t.type for t in tokens].count("tr_open") == 4  # our table alone: its header and the three checks
    assert [t.attrGet("href") for t in walk(tokens) if t.type == "link_open"] == [RUN_URL]
    quoted = [t.content for t in tokens if t.type == "fence" and t.info == "text"]
    assert quoted == [f"{name} said:\n{QUOTED}".replace("\r", "\n") for name in said]
    folds = [t.content for t in tokens if t.type == "html_block"]
    assert sum(f.startswith("<details><summary>") for f in folds) == sum(f.strip() == "</details>" for f in folds)
    assert sum(f.startswith("<details><summary>") for f in folds) == 3 + 4  # the checks', then the diff's


def test_failed_checks_fail_the_job(runner: dict[str, str], tmp_path: Path) -> None:
    ok = bash(script("Fail on a failed check"), {**runner, "DRIFT": "pass", "LINT": "pass", "GATE": "pass"}, tmp_path)
    assert ok.returncode == 0
    failed = bash(script("Fail on a failed check"), {**runner, "DRIFT": "fail", "LINT": "pass", "GATE": ""}, tmp_path)
    assert failed.returncode == 1 and "failed: drift gate" in failed.stdout


def test_one_comment_is_posted_then_updated(runner: dict[str, str], tmp_path: Path) -> None:
    if not shutil.which("jq"):
        pytest.skip("jq (which gh --jq stands for here) is not installed")
    state = Path(runner["STATE"])
    # someone quoting the marker is not the action's comment: it is never edited
    state.write_text(json.dumps([{"id": 7, "user": {"login": "alice"}, "body": f"{MARKER} quoted"}]))
    env = {**runner, "GH_TOKEN": "t", "AUTHOR": "github-actions[bot]", "PR": "5", "REPO": "o/r"}
    post = script("Post or update the review comment")
    for body in ("first", "second"):
        write_review(runner, tmp_path, body)
        result = bash(post, env, tmp_path)
        assert result.returncode == 0, result.stderr
    comments = json.loads(state.read_text())
    assert [c["id"] for c in comments] == [7, 101] and comments[0]["body"] == f"{MARKER} quoted"
    assert comments[1]["body"].startswith(MARKER) and "second" in comments[1]["body"]
    calls = [json.loads(line) for line in Path(runner["LOG"]).read_text().splitlines()]
    methods = [c[c.index("--method") + 1] if "--method" in c else "GET" for c in calls]
    assert methods == ["GET", "POST", "GET", "PATCH"]
    assert "repos/o/r/issues/comments/101" in calls[3]


def market_pull_request(runner: dict[str, str], tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A market repository with the audio app, committed as the base, then its context edited as a pull
    request would (chart not rebuilt, version not raised): the folder, the step's env and the base commit."""
    market = tmp_path / "market"
    shutil.copytree(ROOT / "apps", market / "apps", ignore=shutil.ignore_patterns("gemma4-[dv]*"))
    env = {**runner, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{runner['PATH']}"}
    assert bash("olarespack build", env, market).returncode == 0
    git(market, "init", "-q", "-b", "main")
    git(market, "add", "-A")
    git(market, "commit", "-qm", "base")
    base = git(market, "rev-parse", "HEAD").strip()
    replace_in(market / "apps/gemma4-audio.yaml", "ctx_size: 32768", "ctx_size: 16384")
    return market, env, base


@pytest.mark.helm
def test_the_checks_step_on_a_market_repository(runner: dict[str, str], tmp_path: Path) -> None:
    """The checks script itself, with the real olarespack and helm, on a repository with one app edited in a
    pull request without rebuilding its chart or raising its version."""
    market, env, base = market_pull_request(runner, tmp_path)
    result = bash(script("Drift check, lint and version gate"), {**env, "BASE": base}, market)
    assert result.returncode == 0, result.stderr
    outputs = dict(line.split("=", 1) for line in Path(runner["GITHUB_OUTPUT"]).read_text().splitlines())
    assert outputs == {"drift": "fail", "lint": "pass", "gate": "fail"}
    review = Path(runner["RUNNER_TEMP"]) / "olarespack-review"
    assert "--ctx-size 32768 -> 16384" in (review / "diff.md").read_text()
    assert "[version-gate]" in (review / "gate.txt").read_text()
    assert "chart(s) differ from their specs" in (review / "drift.txt").read_text()


@pytest.mark.helm
def test_a_pull_requests_own_settings_cannot_turn_the_checks_off(runner: dict[str, str], tmp_path: Path) -> None:
    """The PR edits a spec and adds an olarespack.yaml pointing the checks at an empty folder: they still run
    with the base's settings and fail, the review says the settings changed, and the log obeys no workflow
    command quoted from the PR's files."""
    market, env, base = market_pull_request(runner, tmp_path)
    (market / "empty").mkdir()
    (market / "olarespack.yaml").write_text("apps_dir: empty\ncharts_dir: empty\n")
    git(market, "add", "-A")
    git(market, "commit", "-qm", "pr")
    result = bash(script("Drift check, lint and version gate"), {**env, "BASE": base}, market)
    assert result.returncode == 0, result.stderr
    outputs = dict(line.split("=", 1) for line in Path(runner["GITHUB_OUTPUT"]).read_text().splitlines())
    assert outputs["drift"] == "fail" and outputs["gate"] == "fail" and outputs["settings"] == "changed"
    assert result.stdout.count("::stop-commands::olarespack-") == 3
    comment = write_review(runner, tmp_path, "diff", DRIFT="fail", SETTINGS="changed")
    assert "**olarespack.yaml changes in this pull request.**" in comment
