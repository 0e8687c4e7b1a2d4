"""`outdated`: the engine releases newer than each app's image that the release tables know, the image of each
that starts on the box, and what moving there would change, in people's words. A move is planned exactly as
`bump --image` plans it (release/move.py: edited, rendered and checked in memory, nothing written), so what is
offered is what bump would do, and a release lint refuses is listed with the reason instead."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from olarespack.core.errors import ProblemsError
from olarespack.core.hardware import OlaresDriver
from olarespack.engines import engine_for
from olarespack.engines.cuda import newer
from olarespack.engines.protocol import EngineBase
from olarespack.engines.release_files import cache_dir
from olarespack.engines.releases import tables
from olarespack.engines.smoke import SmokeError
from olarespack.helm import Helm
from olarespack.release.bump import Repo
from olarespack.release.move import plan_moves
from olarespack.spec.inplace import editing
from olarespack.spec.load import load_spec


@dataclass(frozen=True)
class Candidate:
    """One newer release of an app's engine."""

    release: str  # as its table names it ("0.33", "b11434")
    image: str | None  # the image of it that starts on the box; None: none does, or its tag is not known
    evaluated: bool  # whether the move was planned (the newest release always; all with `every`)
    movable: bool = False
    note: str = ""  # what the box gets, as bump's note says it
    reasons: tuple[str, ...] = ()  # why it cannot move there (lint's refusals), or what is unsure (warnings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "image": self.image,
            "evaluated": self.evaluated,
            "movable": self.movable,
            "note": self.note,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class AppReleases:
    app: str
    file: str
    image: str
    release: str | None  # the release its image runs, where known
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)

    @property
    def movable(self) -> Candidate | None:
        return next((c for c in self.candidates if c.movable), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "file": self.file,
            "image": self.image,
            "release": self.release,
            "newer": [c.as_dict() for c in self.candidates],
        }


@dataclass(frozen=True)
class Outdated:
    driver: OlaresDriver | None
    apps: tuple[AppReleases, ...]

    @property
    def fits(self) -> bool:
        """True when no app has a release to move to (the exit code's yes)."""
        return not any(app.movable for app in self.apps)

    def as_dict(self) -> dict[str, Any]:
        driver = (
            None
            if self.driver is None
            else {"olares": self.driver.olares, "driver": self.driver.driver, "cuda": self.driver.cuda}
        )
        return {"driver": driver, "up_to_date": self.fits, "apps": [app.as_dict() for app in self.apps]}

    def table(self) -> list[str]:
        lines = []
        for app in self.apps:
            head = f"{app.app}: {app.image}" + (f" (release {app.release})" if app.release else "")
            if not app.candidates:
                lines.append(f"{head}: up to date with the release tables")
                continue
            lines.append(
                f"{head}: {len(app.candidates)} newer release(s) known: " + ", ".join(c.release for c in app.candidates)
            )
            evaluated = [c for c in app.candidates if c.evaluated]
            for at, candidate in enumerate(evaluated):
                follows = evaluated[at + 1] if at + 1 < len(evaluated) else None
                if candidate.movable:
                    lines.append(f"  -> {candidate.release}: `olarespack bump {app.file} --image {candidate.image}`")
                    lines.append(f"     {candidate.note}")
                elif follows is not None and not follows.movable and follows.reasons == candidate.reasons:
                    lines.append(f"  -> {candidate.release}: cannot move, for the reason below")
                    continue  # releases refused alike: the reason is said once, under the last of them
                else:
                    lines.append(
                        f"  -> {candidate.release}: cannot move" + (f" to {candidate.image}" if candidate.image else "")
                    )
                lines += [f"     {reason}" for reason in candidate.reasons]
        lines.append("up to date" if self.fits else "upgrades available")
        return lines


def outdated(
    helm: Helm, repo: Repo, files: Sequence[Path], driver: OlaresDriver | None, every: bool, today: dt.date
) -> Outdated:
    return Outdated(driver, tuple(_app(helm, repo, path, driver, every, today) for path in files))


def _app(helm: Helm, repo: Repo, path: Path, driver: OlaresDriver | None, every: bool, today: dt.date) -> AppReleases:
    spec = load_spec(path)
    bound = engine_for(spec.engine)
    engine = bound.engine
    current = bound.version()
    key = engine.release_key(current) if current else None
    newer_tables = [
        facts.release
        for facts in tables(engine.kind)
        if key is not None and (found := engine.release_key(facts.release)) is not None and found > key[: len(found)]
    ]
    newer_tables.sort(key=lambda release: engine.release_key(release) or (), reverse=True)
    candidates: list[Candidate] = []
    for release in newer_tables:
        image, why = _image(engine, spec.engine.image, release, driver)
        # newest first, until one the app can move to: a release it cannot run does not hide an older one it can
        if not every and any(c.movable for c in candidates):
            candidates.append(Candidate(release, image, False))
            continue
        if image is None:
            candidates.append(Candidate(release, None, True, reasons=(why,)))
            continue
        candidates.append(_bootable(_planned(helm, repo, path, release, image, today), engine, spec.engine))
    return AppReleases(spec.name, str(path), spec.engine.image, current, tuple(candidates))


def _bootable(candidate: Candidate, engine: EngineBase, spec_engine: Any) -> Candidate:
    """A movable release that no local build here boots says so: `olarespack smoke` cannot try the move (the
    proposal to b11549 said nothing of it)."""
    if not candidate.movable or candidate.image is None:
        return candidate
    try:
        engine.smoke().runtime(spec_engine.model_copy(update={"image": candidate.image}), cache_dir(), None)
    except SmokeError as exc:
        return replace(candidate, reasons=(*candidate.reasons, f"not booted here by `olarespack smoke`: {exc}"))
    return candidate


def _image(engine: EngineBase, image: str, release: str, driver: OlaresDriver | None) -> tuple[str | None, str]:
    """The image of `release` in the app's flavour, or the same release's image that the driver runs."""
    same = engine.image_at(image, release)
    if same is None:
        return None, f"the tag of {image} has no form olarespack can carry to {release}: give --image by hand"
    if driver is None:
        return same, ""
    found = engine.image_cuda(same)
    if found.cuda is None or not newer(found.cuda, driver.cuda):
        return same, ""
    runnable = found.runnable(driver)
    if runnable is None:
        return None, (
            f"{same} is built on CUDA {found.cuda}, newer than {driver.title}, and no image of "
            f"{release} on an older CUDA is known"
        )
    return runnable, ""


def _planned(helm: Helm, repo: Repo, path: Path, release: str, image: str, today: dt.date) -> Candidate:
    try:
        with editing(path):  # read as bump reads it; nothing is written
            [bump] = plan_moves(helm, repo, [path], image, "minor", None, today)
    except ProblemsError as exc:
        reasons = tuple(
            f"{p.path or p.file}: {p.message}" + (f" (fix: {p.fix})" if p.fix else "") for p in exc.problems
        )
        return Candidate(release, image, True, reasons=reasons)
    return Candidate(release, image, True, movable=True, note=bump.note, reasons=bump.warnings)
