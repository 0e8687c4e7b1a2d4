"""`olarespack package`, `publish` and `serve`: chart archives, the market folder, and the HTTP source.

Exit codes as in cli.py: 0 ok, 1 problems, 2 usage, 3 helm missing.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import urlparse

import click

from olarespack import market
from olarespack import package as packaging
from olarespack import serve as http_server
from olarespack.cli_support import helm_binary, output_folder
from olarespack.errors import Problem, ProblemsError, UsageError
from olarespack.helm import Helm
from olarespack.project import App, render_apps, sibling_names, spec_files
from olarespack.render import GenerationName, generation_for_olares
from olarespack.serve_catalog import load_state
from olarespack.serve_protocol import ConnectionLimits, default_max_connections
from olarespack.write import write_file

Archives = dict[GenerationName, dict[str, packaging.Archive]]
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
MAX_ICON_BYTES = 2 * 2**20

_specs = click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
_apps_dir = click.option("--apps-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("apps"),
                         show_default=True, help="Where to find specs when none are given.")
_market_dir = click.option("--market-dir", type=click.Path(file_okay=False, path_type=Path),
                           default=Path("market"), show_default=True, help="The market folder.")


@click.command("package")
@_specs
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("dist"),
              show_default=True, help="Folder that receives <name>-<version>.tgz and SHA256SUMS.")
@_apps_dir
@click.option("--olares-version", metavar="VERSION",
              help="Package the manifest generation this Olares release installs instead of the spec's choice.")
def package(specs: tuple[str, ...], out_dir: Path, apps_dir: Path, olares_version: str | None) -> None:
    """Package each SPEC (default: every apps/*.yaml) into a byte-reproducible chart archive."""
    output_folder(out_dir, "--out")
    generation = generation_for_olares(olares_version) if olares_version else None
    apps = render_apps(spec_files(specs, apps_dir), generation)
    helm = helm_binary("helm4")
    archives = [(app, _package(app, helm)) for app in apps]
    for app, archive in archives:
        status = write_file(out_dir / archive.file_name, archive.data)
        click.echo(f"ok {app.spec.name} {app.spec.version}: {out_dir / archive.file_name} "
                   f"sha256 {archive.sha256} ({status})")
    click.echo(f"digests: {packaging.write_digests(out_dir)}")


@click.command("publish")
@_specs
@_market_dir
@click.option("--base-url", metavar="URL",
              help="Public URL of this market. Icons whose URL starts with URL/icons/ must then come from local "
                   "files (<spec folder>/icons/<file>), or boxes would get a 404.")
@_apps_dir
def publish(specs: tuple[str, ...], market_dir: Path, base_url: str | None, apps_dir: Path) -> None:
    """Lint, package and publish every app, both manifest generations, into the market folder.

    \b
    Writes charts/<generation>/<name>-<version>.tgz (old versions stay), charts/SHA256SUMS, icons/,
    static/<generation>/ (the GET answers as files, for static hosts) and catalog.json, last.
    A published version never changes: republishing it with other content is refused."""
    output_folder(market_dir, "--market-dir")
    base = _base_url(base_url)
    files = spec_files(specs, apps_dir)
    others = sibling_names(apps_dir, files) if specs else None
    rendered = {gen: render_apps(files, gen, others) for gen in market.GENERATION_NAMES}
    problems = lint_apps(files)
    if problems:
        raise ProblemsError(problems)
    packager = helm_binary("helm4")
    archives: Archives = {gen: {app.spec.name: _package(app, packager) for app in apps}
                          for gen, apps in rendered.items()}
    icons, problems = local_icons(rendered["current"], base)
    problems += conflicts(market_dir, rendered, archives)
    if problems:
        raise ProblemsError(problems)
    catalog = market.build_catalog({
        gen: [market.MarketApp(app.file, app.spec, app.chart, archives[gen][app.spec.name].sha256,
                               app.spec.metadata.icon) for app in apps]
        for gen, apps in rendered.items()})
    written = packaging.write_market(market_dir, archives, icons, catalog, load_state)
    for warning in sorted({w for apps in rendered.values() for app in apps for w in app.warnings}):
        click.echo(f"WARN {warning}", err=True)
    for app in rendered["current"]:
        parts = [f"{gen} {archives[gen][app.spec.name].sha256[:12]} ({written[gen, app.spec.name]})"
                 for gen in market.GENERATION_NAMES]
        click.echo(f"ok {app.spec.name} {app.spec.version}: {', '.join(parts)}")
    hashes = ", ".join(f"{gen} hash {g['hash']}" for gen, g in catalog["generations"].items())
    click.echo(f"market {market_dir}: {len(rendered['current'])} app(s), {hashes}; "
               f"catalog {written['catalog', '']}")


@click.command("serve")
@_market_dir
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8787, show_default=True, help="Port to listen on.")
@click.option("--poll-seconds", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="How often to look for a catalog.json rewritten by publish.")
@click.option("--max-connections", type=click.IntRange(min=1), default=None,
              help="Open connections at most (default 1000, fewer if the open-file limit is lower); past it, "
                   "idle or slow connections are closed first.")
@click.option("--request-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds a client has to send a whole request (head and body).")
@click.option("--keep-alive", type=click.IntRange(min=1), default=15, show_default=True,
              help="Seconds an idle keep-alive connection stays open.")
def serve(market_dir: Path, host: str, port: int, poll_seconds: float, max_connections: int | None,
          request_timeout: float, keep_alive: int) -> None:
    """Serve the market folder to Olares boxes (hash, info, details, charts, icons, /health).

    \b
    The Olares version a box sends (`version`) picks the generation: 1.12.3-1.12.5 get the legacy
    charts, 1.12.6 and later (or no version) the current ones. /legacy/... and /current/... serve one
    generation whatever the box sends. One log line per request goes to stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limits = ConnectionLimits(max_connections=max_connections or default_max_connections(),
                              request_seconds=request_timeout, keep_alive_seconds=keep_alive)
    http_server.run(market_dir, host, port, poll_seconds, limits)


# --------------------------------------------------------------------------- steps


def lint_apps(files: list[Path]) -> list[Problem]:
    """The publish gate: `olarespack lint` of every spec, both manifest generations, Helm 3 and Helm 4."""
    from olarespack.validate import lint

    return lint([str(f) for f in files], [helm_binary("helm"), helm_binary("helm4")]).errors


def _package(app: App, helm: Helm) -> packaging.Archive:
    return packaging.package_chart(app.chart, app.spec.name, app.spec.version, helm,
                                   market.release_epoch(app.spec))


def _base_url(url: str | None) -> str | None:
    if url is None:
        return None
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise UsageError(f"--base-url: {url!r} is not an http(s) URL like https://market.example.com")
    return url.rstrip("/")


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
            problems.append(Problem(app.file, "metadata.icon", f"{local} is a symbolic link", "make it a regular "
                                    "file: a link could publish any file of the machine", rule="icon-file"))
        elif _SAFE_FILE.match(file_name) and local.is_file():
            if local.stat().st_size > MAX_ICON_BYTES:
                problems.append(Problem(app.file, "metadata.icon", f"{local} is over {MAX_ICON_BYTES // 2**20} MiB",
                                        "use a smaller image (icons show at 256 pixels)", rule="icon-file"))
                continue
            data = local.read_bytes()
            if icons.setdefault(file_name, data) != data:
                problems.append(Problem(app.file, "metadata.icon", f"another app publishes a different {file_name}",
                                        "give each icon its own file name", rule="icon-file"))
        elif ours:
            problems.append(Problem(app.file, "metadata.icon", f"{url} is served by this market but {local} "
                                    "does not exist", f"add the icon as {local}", rule="icon-file"))
    return icons, problems


def conflicts(market_dir: Path, rendered: dict[GenerationName, list[App]], archives: Archives) -> list[Problem]:
    """A published archive is immutable: boxes that have it would never fetch a changed copy."""
    problems: list[Problem] = []
    for gen, apps in rendered.items():
        for app in apps:
            archive = archives[gen][app.spec.name]
            target = market_dir / market.CHARTS_DIR / gen / archive.file_name
            if target.is_file() and target.read_bytes() != archive.data:
                problems.append(Problem(
                    app.file, "version", f"{app.spec.version} is already published ({target}) with other content",
                    "bump version and add a changelog entry: a published version never changes",
                    rule="published-version"))
    return problems

