"""`olarespack market check URL`: what an Olares box does at each step of its sync of a market source."""

from __future__ import annotations

import sys

import click

from olarespack.core.errors import UsageError


@click.group("market")
def market_group() -> None:
    """Look at a market source as Olares boxes see it."""


@market_group.command("check")
@click.argument("url")
@click.option(
    "--olares",
    "versions",
    metavar="VERSION",
    multiple=True,
    help="An Olares version to sync as (repeat; default 1.12.6 and 1.12.7: 1.12.7 and later start "
    "with the v2 calls, the others with the v1 hash). An olarespack market gives 1.12.3-1.12.5 "
    "boxes their charts at URL/legacy: check those there.",
)
@click.option(
    "--source-id",
    default="olarespack-check",
    show_default=True,
    help="The source id a 1.12.7 box sends with its first call (the id it registered the source under).",
)
@click.option("--no-charts", is_flag=True, help="Stop at the details: do not download the chart archives.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.5, max=300),
    default=20.0,
    show_default=True,
    help="Seconds of silence after which a request counts as unanswered.",
)
def check(url: str, versions: tuple[str, ...], source_id: str, no_charts: bool, timeout: float) -> None:
    """Walk the sync of the market at URL for each Olares version, a line per step: take (the box goes on),
    skip (an app is left out), abort (the box stops syncing this source), note (it goes on, something is
    off).

    \b
    Exit 0 when every version gets every app, 1 when a step aborts or an app is skipped. URL is the source
    URL a box is given (http://host:port, or .../legacy); the check sends only what a box sends."""
    from olarespack.market.check import DEFAULT_OLARES, release_of
    from olarespack.market.check import check as walk_all
    from olarespack.market.remote import http_fetch

    if not url.startswith(("http://", "https://")) or len(url) > 2048 or any(c.isspace() for c in url):
        raise UsageError(f"URL: {url[:200]!r} is not an http(s) URL")
    for version in versions:
        try:
            release_of(version)
        except ValueError as exc:
            raise UsageError(f"--olares: {exc}") from None
    walks = walk_all(http_fetch(url, timeout), versions or DEFAULT_OLARES, source_id, charts=not no_charts)
    failed = False
    for walk in walks:
        for step in walk.steps:
            click.echo(step.line())
        failed |= any(step.verdict in ("abort", "skip") for step in walk.steps)
        apps = ", ".join(f"{name} {version}" for name, version in sorted(walk.apps.items())) or "nothing"
        ending = "the sync stops" if walk.aborted else f"the box gets {len(walk.apps)} app(s): {apps}"
        click.echo(f"Olares {walk.olares}: {ending}")
    sys.exit(1 if failed else 0)


@market_group.command("clone-check")
@click.argument("chart", type=click.Path(exists=True))
@click.option(
    "--env",
    "envs",
    metavar="NAME=VALUE",
    multiple=True,
    help="An env the clone sets (repeat), as `olares-cli market clone --env` takes it: ENGINE_ARGS, "
    "MODEL_NAME, <ENGINE>_REQUIRED_GPU_MEMORY, ...",
)
@click.option(
    "--hardware",
    default="rtx5090-laptop",
    show_default=True,
    help="The GPU profile whose card the booked GPU memory must fit.",
)
def clone_check(chart: str, envs: tuple[str, ...], hardware: str) -> None:
    """Check a clone of an Olares engine-base app (vllmllmbasev3, llamacppllmbasev3: CHART, a folder or .tgz)
    before `olares-cli market clone` makes it: the chart rendered with the clone's envs, ENGINE_ARGS judged by
    the release table of the engine image it runs, each env by what the manifest declares of it, the GPU
    memory by the card. Exit 0 when nothing is refused, 1 otherwise. Olares' clone checks only the title: a
    clone whose ENGINE_ARGS the engine refuses installs and then fails to serve."""
    from contextlib import ExitStack

    from olarespack.check.clone import check_clone
    from olarespack.check.inputs import classify
    from olarespack.cli.group import helm_binary

    given: dict[str, str] = {}
    for pair in envs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env: give NAME=VALUE, e.g. ENGINE_ARGS='--max-model-len 32768' (got {pair[:80]!r})")
        given[name] = value
    with ExitStack() as stack:
        specs, targets, refused = classify([chart], stack)
        if specs or refused or len(targets) != 1:
            why = "; ".join(str(p) for p in refused) or "give one chart (a folder or a .tgz), not a spec"
            raise UsageError(f"{chart}: {why}")
        report = check_clone(targets[0], helm_binary(), given, hardware)
    if report.engine:
        click.echo(f"engine: {report.engine}; ENGINE_ARGS: {' '.join(report.arguments) or '(none)'}")
    for problem in report.problems:
        click.echo(str(problem))
    errors = [p for p in report.problems if p.severity == "error"]
    click.echo(
        f"{'refused' if errors else 'ok'}: {len(errors)} error(s), {len(report.problems) - len(errors)} warning(s)"
    )
    sys.exit(1 if errors else 0)
