"""A market repository's settings, in one file at its root (`olarespack.yaml`, written by `olarespack init`):
where its folders are, the GPU profile new apps target, and the market's public URLs. Every command reads it
from the folder it runs in, as the defaults of its options; an option given on the command line wins."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StringConstraints, ValidationError

from olarespack.errors import Problem, SpecError
from olarespack.spec.file import load_spec_data
from olarespack.spec.translate import problem_of
from olarespack.spec.types import HardwareName, StrictModel, Url

CONFIG_FILE = "olarespack.yaml"
# a folder of the repository, relative to its root: never absolute, never above it
_PART = r"[A-Za-z0-9_-][A-Za-z0-9._-]*"
Folder = Annotated[str, StringConstraints(max_length=200, pattern=rf"^{_PART}(/{_PART})*$")]


class ProjectConfig(StrictModel):
    """olarespack.yaml: a market repository's folders and URLs."""

    apps_dir: Folder = Field("apps", description="Where the specs are; models/ sits beside it.")
    charts_dir: Folder = Field("charts", description="Where the rendered charts are (committed).")
    market_dir: Folder = Field("market", description="Where publish writes the market.")
    hardware: HardwareName = Field("rtx5090-laptop", description="The GPU profile imported apps target.")
    market_url: Url | None = Field(None, description="The market's public URL: publish's --base-url, and the "
                                   "source URL serve tells you to add in Olares.")
    icon_base_url: Url | None = Field(None, description="Where the icons are served (default <market_url>/icons/); "
                                      "init's specs and import use it for icon URLs.")


def load_config(folder: Path) -> ProjectConfig | None:
    """The repository's settings, None when the folder has no olarespack.yaml. The file is read like a spec
    (bounded, no anchors): a pull request can change it."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return None
    data = load_spec_data(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError([Problem(str(path), "", "must be a YAML mapping", "see `olarespack init`", rule="yaml")])
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as exc:
        raise SpecError([problem_of(str(path), error) for error in exc.errors()]) from None


def option_defaults(config: ProjectConfig) -> dict[str, Any]:
    """click's default_map: each command's options that the settings decide."""
    folders = {"apps_dir": Path(config.apps_dir), "charts_dir": Path(config.charts_dir),
               "market_dir": Path(config.market_dir)}
    base = {"base_url": config.market_url} if config.market_url else {}
    commands = ("build", "lint", "fit", "bump", "diff", "package", "publish", "serve", "import")
    defaults: dict[str, Any] = {name: dict(folders) for name in commands}
    defaults["publish"].update(base)
    defaults["serve"].update({"public_url": config.market_url} if config.market_url else {})
    defaults["import"]["hardware"] = config.hardware
    return defaults
