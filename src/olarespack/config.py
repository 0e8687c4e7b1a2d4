"""A market repository's settings, in one file at its root (`olarespack.yaml`, written by `olarespack init`):
where its folders are, the GPU profile new apps target, and the market's public URLs. Every command reads it
from the folder it runs in, as the defaults of its options; an option given on the command line wins."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StringConstraints, ValidationError

from olarespack.core.errors import Problem, SpecError
from olarespack.core.types import HardwareName, LocaleName, StrictModel, Url
from olarespack.core.yamlfile import load_spec_data
from olarespack.spec.translate import problem_of

CONFIG_FILE = "olarespack.yaml"
CONFIG_ENV = "OLARESPACK_CONFIG"  # another settings file (the review action gives the base's)
# a folder of the repository, relative to its root: never absolute, never above it
_PART = r"[A-Za-z0-9_-][A-Za-z0-9._-]*"
Folder = Annotated[str, StringConstraints(max_length=200, pattern=rf"^{_PART}(/{_PART})*$")]


SourceId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$")]
Label = Annotated[str, StringConstraints(min_length=1, max_length=32, pattern=r"^[^\x00-\x1f\x7f]+$")]
DisplayName = Annotated[str, StringConstraints(min_length=1, max_length=80, pattern=r"^[^\x00-\x1f\x7f]+$")]


class SourceSettings(StrictModel):
    """How Olares 1.12.7 and later name this market: its add-source dialog and source list read these from the
    market's answers (the v2 taxonomy's `source`)."""

    id: SourceId = Field(
        description="The source's id, e.g. market.example (lowercase letters, digits, dots, dashes, underscores)."
    )
    label: Label = Field(description="The short label a box shows for the source.")
    name: dict[LocaleName, DisplayName] = Field(
        min_length=1, max_length=32, description="The source's name, by locale, e.g. {en-US: Example market}."
    )
    icon: Url | None = Field(None, description="The source's icon URL.")


class ProjectConfig(StrictModel):
    """olarespack.yaml: a market repository's folders and URLs."""

    apps_dir: Folder = Field("apps", description="Where the specs are; models/ sits beside it.")
    charts_dir: Folder = Field("charts", description="Where the rendered charts are (committed).")
    market_dir: Folder = Field("market", description="Where publish writes the market.")
    hardware: HardwareName = Field("rtx5090-laptop", description="The GPU profile imported apps target.")
    market_url: Url | None = Field(
        None,
        description="The market's public URL: publish's --base-url, and the "
        "source URL serve tells you to add in Olares.",
    )
    icon_base_url: Url | None = Field(
        None,
        description="Where the icons are served (default <market_url>/icons/); "
        "init's specs and import use it for icon URLs.",
    )
    source: SourceSettings | None = Field(
        None, description="The market's identity, as Olares 1.12.7 and later show it (publish's --source-* options)."
    )
    other_sources: list[Annotated[str, StringConstraints(min_length=1, max_length=2048)]] = Field(
        default_factory=list,
        max_length=32,
        description="Other market sources boxes sync beside this one (URLs, "
        "or files of their saved answers): publish warns of an app of the same name offered there at another "
        "version.",
    )


@dataclass(frozen=True)
class Project:
    """A repository's settings and where they apply from."""

    config: ProjectConfig
    root: Path  # the folder holding olarespack.yaml: its folders are relative to it
    file: Path


def find_settings(start: Path, environ: Mapping[str, str]) -> Path | None:
    """OLARESPACK_CONFIG when set (the review action points it at the base's file), else the olarespack.yaml
    of the folder or of the nearest folder above it, up to the repository's top (a .git) or the disk's."""
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder / CONFIG_FILE
        if (folder / ".git").exists():
            return None
    return None


def load_project(start: Path, environ: Mapping[str, str]) -> Project | None:
    path = find_settings(start, environ)
    if path is None:
        return None
    root = start if environ.get(CONFIG_ENV) else path.parent
    config = load_config(path)
    problems = [
        Problem(
            str(path),
            name,
            problem,
            "use a folder inside the repository, reached without symbolic links",
            rule="spec-format",
        )
        for name in ("apps_dir", "charts_dir", "market_dir")
        if (problem := _outside(root, getattr(config, name)))
    ]
    if problems:
        raise SpecError(problems)
    return Project(config, root, path)


def _outside(root: Path, folder: str) -> str | None:
    """Why a configured folder would lead out of the repository (a symbolic link on its way), or None: a pull
    request's settings must not make build or publish write elsewhere on the machine."""
    current = root
    for part in Path(folder).parts:
        current = current / part
        if current.is_symlink():
            return f"{folder}: {current} is a symbolic link"
        if current.exists() and not current.resolve().is_relative_to(root.resolve()):
            return f"{folder}: leads outside the repository"
    return None


def load_config(path: Path) -> ProjectConfig:
    """One settings file, read like a spec (bounded, no anchors): a pull request can change it."""
    data = load_spec_data(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError([Problem(str(path), "", "must be a YAML mapping", "see `olarespack init`", rule="yaml")])
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as exc:
        raise SpecError([problem_of(str(path), error) for error in exc.errors()]) from None


def option_defaults(project: Project, cwd: Path) -> dict[str, Any]:
    """click's default_map: each command's options that the settings decide. Folders are relative to the
    settings' folder: as given when the command runs there, absolute from a folder below it."""
    config = project.config

    def folder(name: str) -> Path:
        return Path(name) if project.root.resolve() == cwd.resolve() else project.root / name

    folders = {
        "apps_dir": folder(config.apps_dir),
        "charts_dir": folder(config.charts_dir),
        "market_dir": folder(config.market_dir),
    }
    commands = ("build", "lint", "fit", "bump", "diff", "package", "publish", "serve", "import")
    defaults: dict[str, Any] = {name: dict(folders) for name in commands}
    if config.market_url:
        defaults["publish"]["base_url"] = config.market_url
        defaults["serve"]["public_url"] = config.market_url
    defaults["import"]["hardware"] = config.hardware
    if config.other_sources:
        defaults["publish"]["other_sources"] = list(config.other_sources)
    if config.source:
        defaults["publish"] |= {
            "source_id": config.source.id,
            "source_label": config.source.label,
            "source_name": [f"{locale}={text}" for locale, text in config.source.name.items()],
            "source_icon": config.source.icon,
        }
    # commands of a group read their defaults one level down
    defaults["export"] = {"cloudflare": {"market_dir": folders["market_dir"]}}
    defaults["model"] = {"add": {"models_dir": folders["apps_dir"].parent / "models"}}
    return defaults
