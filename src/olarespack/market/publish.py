"""Publishing a market: every app rendered once (both generations), linted, packaged, catalogued, and the
whole market folder written at once (market/folder.py).

Work follows change. The market's publish-state.json records, for each archive, a digest of the chart
files it was made from, and a digest of the olarespack that rendered and checked them. An archive whose
chart is unchanged is taken as published (a published version never changes, whatever helm would write
today); an app whose charts are all unchanged, checked by the same olarespack, is not linted again. So an
unchanged republish costs a render, not a lint."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from olarespack import package as packaging
from olarespack.check.lint import lint_apps
from olarespack.core.chart import Chart
from olarespack.core.errors import Problem, ProblemsError
from olarespack.helm import Helm
from olarespack.market import catalog as market
from olarespack.market import v2
from olarespack.market.folder import write_market
from olarespack.market.state import load_state
from olarespack.olares.generations import GENERATION_NAMES, GenerationName, archive_name, parse_archive_name
from olarespack.project import App, render_apps
from olarespack.release import git
from olarespack.release.version import is_higher, is_version
from olarespack.write import Status

STATE_FILE = "publish-state.json"
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
MAX_ICON_BYTES = 2 * 2**20
Archives = dict[GenerationName, dict[str, packaging.Archive]]


@dataclass(frozen=True)
class Published:
    apps: list[App]
    archives: Archives
    reused: set[tuple[GenerationName, str]]  # (generation, app) whose archive was taken as published
    catalog: dict[str, Any]
    written: dict[tuple[str, str], Status]


@cache
def tool_fingerprint() -> str:
    """A digest of olarespack itself (code, templates, data): a new olarespack may render or judge the same
    spec differently, so its content keys differ."""
    digest = hashlib.sha256()
    root = resources.files("olarespack")
    stack = [root]
    entries = []
    while stack:
        for entry in stack.pop().iterdir():
            if entry.is_dir() and entry.name != "__pycache__":
                stack.append(entry)
            elif entry.is_file() and not entry.name.endswith(".pyc"):
                entries.append(entry)
    for entry in sorted(entries, key=lambda e: str(e)):
        digest.update(str(entry).removeprefix(str(root)).encode() + b"\0" + entry.read_bytes())
    from olarespack.render.jinja import template_dir

    for path in sorted(template_dir().rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(template_dir()).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def content_key(chart: Chart) -> str:
    digest = hashlib.sha256()
    for path, text in sorted(chart.items()):
        digest.update(path.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def _previous(market_dir: Path) -> tuple[str | None, dict[str, dict[str, str]]]:
    """(tools digest, generation -> archive file -> chart digest) of the last publish; nothing when unknown."""
    try:
        state = json.loads((market_dir / STATE_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None, {}
    if not isinstance(state, dict) or not isinstance(state.get("archives"), dict):
        return None, {}
    tools = state.get("tools")
    return (tools if isinstance(tools, str) else None), state["archives"]


def _previous_catalog(market_dir: Path) -> Any:
    """The catalog this publish replaces, parsed (None: no market yet, or one serve would refuse): what the
    1.12.7 sync record carries forward (the apps no longer offered, when each part last changed)."""
    try:
        return json.loads((market_dir / market.CATALOG_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def _reusable(
    market_dir: Path, gen: GenerationName, file_name: str, key: str, previous: dict[str, dict[str, str]]
) -> packaging.Archive | None:
    if (previous.get(gen) or {}).get(file_name) != key:
        return None
    path = market_dir / market.CHARTS_DIR / gen / file_name
    if path.is_symlink() or not path.is_file():
        return None
    return packaging.Archive(file_name, path.read_bytes())


def dated(apps: list[App]) -> list[App]:
    """The apps with a date on every changelog entry: an undated one gets the day of the commit that added it
    (or its nearest dated entry's); an app with no date at all is refused, never published as 1970."""
    out: list[App] = []
    problems: list[Problem] = []
    for app in apps:
        undated = [entry.version for entry in app.spec.changelog if entry.date is None]
        added = git.added_dates(Path(app.file), undated) if undated else {}
        try:
            out.append(replace(app, spec=market.dated_spec(app.spec, added)))
        except market.UndatedError:
            problems.append(
                Problem(
                    app.file,
                    "changelog[0].date",
                    "no changelog entry has a date, and git does not know when they were added",
                    "add date: YYYY-MM-DD to the newest entry",
                    rule="changelog-date",
                )
            )
    if problems:
        raise ProblemsError(problems)
    return out


def publish(
    files: list[Path],
    market_dir: Path,
    base_url: str | None,
    others: dict[str, str] | None,
    helms: Callable[[], Sequence[Helm]],
    packager: Callable[[], Helm],
    jobs: int = 2,
    progress: Callable[[str], None] = lambda line: None,
    allow_older: bool = False,
    source: v2.SourceIdentity = v2.DEFAULT_SOURCE,
) -> Published:
    """`progress` gets a line per step (rendered, linted, packaged), so a long publish is never silent."""
    apps = dated(render_apps(files, GENERATION_NAMES, others))
    progress(f"rendered {len(apps)} app(s), both generations")
    tools = tool_fingerprint()
    checked_by, previous = _previous(market_dir)
    keys = {(gen, app.spec.name): content_key(chart) for app in apps for gen, chart in app.charts.items()}
    archives: Archives = {gen: {} for gen in GENERATION_NAMES}
    reused: set[tuple[GenerationName, str]] = set()
    unchecked: list[App] = []
    for app in apps:
        file_name = archive_name(app.spec.name, app.spec.version)
        for gen in app.charts:
            archive = _reusable(market_dir, gen, file_name, keys[gen, app.spec.name], previous)
            if archive is not None:
                archives[gen][app.spec.name] = archive
                reused.add((gen, app.spec.name))
        if checked_by != tools or any((gen, app.spec.name) not in reused for gen in app.charts):
            unchecked.append(app)
    if unchecked:
        progress(f"linting {len(unchecked)} changed app(s) with helm: {', '.join(a.spec.name for a in unchecked)}")
    problems = lint_apps(unchecked, helms, jobs).errors if unchecked else []
    if problems:
        raise ProblemsError(problems)
    if len(unchecked) < len(apps):
        progress(f"{len(apps) - len(unchecked)} app(s) unchanged since the last publish: not linted or packaged again")
    helm: Helm | None = None
    for app in apps:
        for gen, chart in app.charts.items():
            if (gen, app.spec.name) not in reused:
                helm = helm or packager()
                archives[gen][app.spec.name] = packaging.package_chart(
                    chart, app.spec.name, app.spec.version, helm, market.release_epoch(app.spec)
                )
                progress(f"packaged {app.spec.name} {app.spec.version} ({gen})")
    icons, problems = local_icons(apps, base_url)
    problems += conflicts(market_dir, apps, archives)
    problems += [] if allow_older else backwards(market_dir, apps)
    if problems:
        raise ProblemsError(problems)
    catalog = market.build_catalog(
        {
            gen: [
                market.MarketApp(
                    app.file, app.spec, app.charts[gen], archives[gen][app.spec.name].sha256, app.spec.metadata.icon
                )
                for app in apps
            ]
            for gen in GENERATION_NAMES
        }
    )
    catalog = v2.with_sync(catalog, source, _previous_catalog(market_dir))
    state = {
        "tools": tools,
        "archives": {
            gen: {archive.file_name: keys[gen, name] for name, archive in sorted(archives[gen].items())}
            for gen in GENERATION_NAMES
        },
    }
    written = write_market(
        market_dir,
        archives,
        icons,
        catalog,
        load_state,
        {STATE_FILE: (json.dumps(state, indent=1, sort_keys=True) + "\n").encode()},
    )
    return Published(apps, archives, reused, catalog, written)


def local_icons(apps: list[App], base_url: str | None) -> tuple[dict[str, bytes], list[Problem]]:
    """Icons to publish: <spec folder>/icons/<file named by the icon URL>, when it exists. An icon URL under
    <base-url>/icons/ points at this market, so its file must exist."""
    icons: dict[str, bytes] = {}
    problems: list[Problem] = []
    for app in apps:
        url = app.spec.metadata.icon
        file_name = Path(urlparse(url).path).name
        local = Path(app.file).parent / "icons" / file_name
        ours = base_url is not None and url.startswith(f"{base_url}/{market.ICONS_DIR}/")
        if _SAFE_FILE.match(file_name) and local.is_symlink():
            problems.append(
                Problem(
                    app.file,
                    "metadata.icon",
                    f"{local} is a symbolic link",
                    "make it a regular file: a link could publish any file of the machine",
                    rule="icon-file",
                )
            )
        elif _SAFE_FILE.match(file_name) and local.is_file():
            if local.stat().st_size > MAX_ICON_BYTES:
                problems.append(
                    Problem(
                        app.file,
                        "metadata.icon",
                        f"{local} is over {MAX_ICON_BYTES // 2**20} MiB",
                        "use a smaller image (icons show at 256 pixels)",
                        rule="icon-file",
                    )
                )
                continue
            data = local.read_bytes()
            if icons.setdefault(file_name, data) != data:
                problems.append(
                    Problem(
                        app.file,
                        "metadata.icon",
                        f"another app publishes a different {file_name}",
                        "give each icon its own file name",
                        rule="icon-file",
                    )
                )
        elif ours:
            problems.append(
                Problem(
                    app.file,
                    "metadata.icon",
                    f"{url} is served by this market but {local} does not exist",
                    f"add the icon as {local}",
                    rule="icon-file",
                )
            )
    return icons, problems


def conflicts(market_dir: Path, apps: list[App], archives: Archives) -> list[Problem]:
    """A published archive is immutable: boxes that have it would never fetch a changed copy."""
    problems: list[Problem] = []
    for gen, by_app in archives.items():
        for app in apps:
            archive = by_app[app.spec.name]
            target = market_dir / market.CHARTS_DIR / gen / archive.file_name
            if target.is_file() and target.read_bytes() != archive.data:
                problems.append(
                    Problem(
                        app.file,
                        "version",
                        f"{app.spec.version} is already published ({target}) with other content",
                        "bump version and add a changelog entry: a published version never changes",
                        rule="published-version",
                    )
                )
    return problems


def backwards(market_dir: Path, apps: list[App]) -> list[Problem]:
    """An app whose spec is older than what the market offers now: the catalog would move boxes' offer back
    (a box that installed the newer one sees no update, and one that did not is offered the older)."""
    try:
        current = json.loads((market_dir / market.CATALOG_FILE).read_bytes())
        offered = {
            name: version
            for gen in current["generations"].values()
            for name, file in gen["charts"].items()
            if (parsed := parse_archive_name(str(file))) and (version := parsed[1])
        }
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return []  # no market yet, or one serve refuses anyway: nothing offered to move back from
    problems = []
    for app in apps:
        now = offered.get(app.spec.name)
        if is_version(now) and is_higher(str(now), app.spec.version):
            problems.append(
                Problem(
                    app.file,
                    "version",
                    f"{app.spec.version} is older than {now}, which {market_dir} offers now: "
                    "publishing it moves the market back",
                    f"bump above {now} (olarespack bump), or pass --allow-older to move the market back on purpose",
                    rule="published-version",
                )
            )
    return problems
