"""`olarespack package`, `publish` and `serve`: chart archives, the market folder, and the HTTP source."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import click

from olarespack import package as packaging
from olarespack.cli import options
from olarespack.cli.group import helm_binary, output_folder
from olarespack.core.errors import UsageError
from olarespack.helm import Helm
from olarespack.market import catalog as market
from olarespack.market.v2 import DEFAULT_SOURCE, SourceIdentity
from olarespack.olares.generations import GENERATION_NAMES, GenerationName
from olarespack.project import App, render_apps, sibling_names, spec_files
from olarespack.write import write_file


@click.command("package")
@options.specs
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("dist"),
    show_default=True,
    help="Folder that receives <name>-<version>.tgz and SHA256SUMS.",
)
@options.apps_dir
@options.olares_version
def package(specs: tuple[str, ...], out_dir: Path, apps_dir: Path, generation: GenerationName | None) -> None:
    """Package each SPEC (default: every apps/*.yaml) into a byte-reproducible chart archive."""
    output_folder(out_dir, "--out")
    from olarespack.market.publish import dated

    apps = dated(render_apps(spec_files(specs, apps_dir), [generation] if generation else None))
    helm = helm_binary("helm4")
    for app in apps:
        archive = packaging.package_chart(
            app.chart, app.spec.name, app.spec.version, helm, market.release_epoch(app.spec)
        )
        status = write_file(out_dir / archive.file_name, archive.data)
        click.echo(
            f"ok {app.spec.name} {app.spec.version}: {out_dir / archive.file_name} sha256 {archive.sha256} ({status})"
        )
    click.echo(f"digests: {packaging.write_digests(out_dir)}")


@click.command("publish")
@options.specs
@options.market_dir
@click.option(
    "--base-url",
    metavar="URL",
    help="Public URL of this market. Icons whose URL starts with URL/icons/ must then come from local "
    "files (<spec folder>/icons/<file>), or boxes would get a 404.",
)
@options.apps_dir
@options.jobs
@click.option(
    "--allow-older",
    is_flag=True,
    help="Publish a spec older than the version the market offers now "
    "(a rollback on purpose: boxes that installed the newer one are not offered the older).",
)
@click.option(
    "--source-id",
    metavar="ID",
    help="The market's source id, e.g. market.example (olarespack.yaml's "
    "source.id): Olares 1.12.7 and later know a source by it.",
)
@click.option("--source-label", metavar="TEXT", help="The short label a box shows for this market (source.label).")
@click.option(
    "--source-name",
    metavar="LOCALE=TEXT",
    multiple=True,
    help="The market's name in a locale, e.g. 'en-US=Example market' (source.name); repeat for each locale.",
)
@click.option("--source-icon", metavar="URL", help="The market's icon (source.icon).")
@click.option(
    "--other-source",
    "other_sources",
    metavar="URL_OR_FILE",
    multiple=True,
    help="Another market source boxes may sync beside this one (its URL, or a file with one of its answers: "
    "the v2 application list or the v1 info): an app of the same name it offers at another version "
    "is warned of (olarespack.yaml's other_sources).",
)
def publish(
    specs: tuple[str, ...],
    market_dir: Path,
    base_url: str | None,
    apps_dir: Path,
    jobs: int,
    allow_older: bool,
    source_id: str | None,
    source_label: str | None,
    source_name: tuple[str, ...],
    source_icon: str | None,
    other_sources: tuple[str, ...],
) -> None:
    """Lint, package and publish every app, both manifest generations, into the market folder.

    \b
    Writes charts/<generation>/<name>-<version>.tgz (old versions stay), charts/SHA256SUMS, icons/,
    static/<generation>/ (the GET answers as files, for static hosts), publish-state.json and
    catalog.json, all swapped in at once. A published version never changes: republishing it with other
    content is refused. Apps whose charts did not change are neither linted nor packaged again."""
    from olarespack.market.publish import publish as run_publish

    output_folder(market_dir, "--market-dir")
    base = _base_url(base_url)
    files = spec_files(specs, apps_dir)
    source = _source(source_id, source_label, source_name, source_icon)

    def helms() -> Sequence[Helm]:
        return [helm_binary("helm"), helm_binary("helm4")]

    done = run_publish(
        files,
        market_dir,
        base,
        sibling_names(apps_dir, files) if specs else None,
        helms,
        lambda: helm_binary("helm4"),
        jobs,
        progress=lambda line: click.echo(f"... {line}", err=True),
        allow_older=allow_older,
        source=source,
    )
    if source == DEFAULT_SOURCE:
        click.echo(
            f"WARN the market has no identity of its own: Olares 1.12.7 and later list it as "
            f"{source.short_label!r} (fix: set source.id, source.label and source.name in olarespack.yaml, "
            "or give --source-id, --source-label and --source-name)",
            err=True,
        )
    for line in _same_names(done.apps, other_sources):
        click.echo(f"WARN {line}", err=True)
    for warning in sorted({w for app in done.apps for w in app.warnings}):
        click.echo(f"WARN {warning}", err=True)
    for app in done.apps:
        parts = [
            f"{gen} chart sha256 {done.archives[gen][app.spec.name].sha256[:12]} ({done.written[gen, app.spec.name]})"
            for gen in GENERATION_NAMES
        ]
        click.echo(f"ok {app.spec.name} {app.spec.version}: {', '.join(parts)}")
    hashes = ", ".join(f"{gen} catalog hash {g['hash']}" for gen, g in done.catalog["generations"].items())
    click.echo(
        f"market {market_dir}: {len(done.apps)} app(s); {hashes} (what boxes compare to know an update); "
        f"catalog.json {done.written['catalog', '']}"
    )


def _same_names(apps: Sequence[App], sources: tuple[str, ...]) -> list[str]:
    """Apps another source offers under the same name at another version: a box syncing both lists two apps of
    one name, and an upgrade offered by one may come from the other."""
    from olarespack.market.remote import shown, source_apps

    lines = []
    for source in sources:
        try:
            offered = source_apps(source)
        except (OSError, ValueError) as exc:
            lines.append(
                f"--other-source {shown(source, 200)}: cannot be read ({shown(str(exc), 200)}); apps of the "
                "same name there are not checked"
            )
            continue
        for app in apps:
            theirs = offered.get(app.spec.name)
            if theirs is not None and theirs != app.spec.version:
                lines.append(
                    f"{app.file}: name: {app.spec.name} is also offered by {shown(source, 200)} at "
                    f"{shown(theirs, 40)} (this market: {app.spec.version}): a box that syncs both lists "
                    "two apps of one name and may take either's update (fix: rename the app if it is not "
                    "the same one, or agree on the versions)"
                )
    return lines


def _source(source_id: str | None, label: str | None, names: tuple[str, ...], icon: str | None) -> SourceIdentity:
    """The identity the options give (checked as olarespack.yaml's source is), or the default one."""
    from pydantic import ValidationError

    from olarespack.config import SourceSettings

    if source_id is None and label is None and not names and icon is None:
        return DEFAULT_SOURCE
    pairs = [name.partition("=") for name in names]
    if any(not sep for _, sep, _ in pairs):
        raise UsageError("--source-name: give LOCALE=TEXT, e.g. 'en-US=Example market'")
    try:
        settings = SourceSettings.model_validate(
            {"id": source_id, "label": label, "icon": icon, "name": {locale: text for locale, _, text in pairs}}
        )
    except ValidationError as exc:
        where = ", ".join(f"--source-{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:4])
        raise UsageError(f"{where} (set source.id, source.label and source.name together)") from None
    return SourceIdentity(settings.id, settings.label, dict(settings.name), settings.icon or "")


@click.command("serve")
@options.market_dir
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8787, show_default=True, help="Port to listen on.")
@click.option(
    "--poll-seconds",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="How often to look for a catalog.json rewritten by publish.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=None,
    help="Open connections at most (default 1000, fewer if the open-file limit is lower); past it, "
    "idle or slow connections are closed first.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds a client has to send a whole request (head and body).",
)
@click.option(
    "--keep-alive",
    type=click.IntRange(min=1),
    default=15,
    show_default=True,
    help="Seconds an idle keep-alive connection stays open.",
)
@click.option(
    "--public-url",
    "public_url",
    metavar="URL",
    help="The URL boxes reach this server by (default: olarespack.yaml's market_url); printed as the source to add.",
)
def serve(
    market_dir: Path,
    host: str,
    port: int,
    poll_seconds: float,
    max_connections: int | None,
    request_timeout: float,
    keep_alive: int,
    public_url: str | None,
) -> None:
    """Serve the market folder to Olares boxes (hash, info, details, charts, icons, /health).

    \b
    The Olares version a box sends (`version`) picks the generation: 1.12.3-1.12.5 get the legacy
    charts, 1.12.6 and later (or no version) the current ones. /legacy/... and /current/... serve one
    generation whatever the box sends. One log line per request goes to stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from olarespack.market import serve as http_server
    from olarespack.market.connections import ConnectionLimits, default_max_connections

    limits = ConnectionLimits(
        max_connections=max_connections or default_max_connections(),
        request_seconds=request_timeout,
        keep_alive_seconds=keep_alive,
    )
    for line in source_lines(host, port, public_url):
        click.echo(line, err=True)
    http_server.run(market_dir, host, port, poll_seconds, limits)


def _lan_address() -> str | None:
    """This machine's address on its network: the one a UDP socket would leave from (connect sends nothing)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 9))
        address: str = probe.getsockname()[0]
        return None if address.startswith("127.") or address == "0.0.0.0" else address
    return None


def source_lines(host: str, port: int, public_url: str | None) -> list[str]:
    """What to add in Olares (the Market's settings, a custom source) and how a box reaches this server."""
    shown_port = port or "<port>"
    lines = [f"serving on http://{host if ':' not in host else f'[{host}]'}:{shown_port}"]
    if public_url:
        public = public_url.rstrip("/")
        lines.append(
            f"add this source in Olares: {public} (Olares 1.12.3-1.12.5: {public}/legacy), if that URL "
            "reaches this server"
        )
    if host in ("127.0.0.1", "localhost", "::1"):
        if not public_url:
            lines.append(
                "a box cannot reach 127.0.0.1: run with --host 0.0.0.0 to serve your network, or put "
                "this server behind a public URL (set market_url in olarespack.yaml)"
            )
        return lines
    address = host if host not in ("0.0.0.0", "::") else (_lan_address() or "<this machine's address>")
    url = f"http://{address}:{shown_port}"
    lines.append(
        f"{'or, on this network' if public_url else 'add this source in Olares'}: {url} (Olares "
        f"1.12.3-1.12.5: {url}/legacy); the box must reach this machine on that port"
    )
    return lines


def _base_url(url: str | None) -> str | None:
    if url is None:
        return None
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise UsageError(f"--base-url: {url!r} is not an http(s) URL like https://market.example.com")
    return url.rstrip("/")
