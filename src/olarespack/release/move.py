"""Moving apps to another engine release (`bump SPEC --image REF`): the image line edited in place, the spec
rendered with that release's facts, refused as a whole when the new release cannot run what the spec says,
and the version raised with a note that tells what the box will run differently."""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
from pathlib import Path

from olarespack.core.chart import Chart
from olarespack.core.errors import ModelDataError, Problem, ProblemsError, UsageError
from olarespack.engines import engine_for
from olarespack.engines.base import Arg
from olarespack.engines.images import engine_of_image
from olarespack.fit.budget import fit_report, spec_calibration
from olarespack.helm import Helm
from olarespack.models.registry import models_for
from olarespack.olares.generations import GENERATION_NAMES, GenerationName
from olarespack.project import App, load_resolved, render_apps
from olarespack.release.bump import Bump, Repo, hand_edited
from olarespack.release.diff import diff_apps
from olarespack.release.edit import edit_spec, move_image
from olarespack.release.notes import box_changes, release_note, stale_figures
from olarespack.release.version import Part
from olarespack.render import render_chart
from olarespack.spec.inplace import read_spec_text
from olarespack.spec.models import AppSpec


def plan_moves(
    helm: Helm, repo: Repo, files: list[Path], given: str, part: Part, note: str | None, today: dt.date
) -> list[Bump]:
    """Every move edited, rendered and checked in memory; raises one ProblemsError naming every refusal."""
    bumps: list[Bump] = []
    problems: list[Problem] = []
    for path in files:
        try:
            # the spec as it is need only load: a move may be what makes it run
            spec = load_resolved(path, strict=False).spec
            bumps.append(
                _move(helm, repo, App(str(path), spec, _rendered(spec, str(path))), path, given, part, note, today)
            )
        except ProblemsError as exc:
            problems += exc.problems
    if problems:
        raise ProblemsError(problems)
    return bumps


def _rendered(spec: AppSpec, file: str) -> dict[GenerationName, Chart]:
    """What the spec renders now (unchecked): a chart folder `olarespack build` wrote from it is no hand edit."""
    try:
        return {spec.olares.generation: render_chart(spec, file)}
    except ProblemsError:  # a spec the move itself mends: only the base's chart then tells a folder unedited
        return {}


def _move(
    helm: Helm, repo: Repo, app: App, path: Path, given: str, part: Part, note: str | None, today: dt.date
) -> Bump:
    dirty = hand_edited(repo, app)
    if dirty:
        raise ProblemsError([dirty])
    moved = move_image(path, read_spec_text(path), given)
    if moved.new_image == moved.old_image:
        raise ProblemsError(
            [
                Problem(
                    app.file,
                    "engine.image",
                    f"already runs {moved.old_image}",
                    "give another image, or bump without --image",
                    rule="bump",
                )
            ]
        )
    family = engine_of_image(moved.new_image)
    bound = engine_for(app.spec.engine)
    if family is not None and family.engine != bound.kind:
        raise ProblemsError(
            [
                Problem(
                    app.file,
                    "engine.image",
                    f"{moved.new_image} is a {family.name} image; the spec configures {bound.title}",
                    f"give a {bound.title} image, or rewrite the engine section for the other engine",
                    rule="bump",
                )
            ]
        )
    if moved.stale_version is not None:  # engine.version went out with the old image: the tag must say it now
        unstated = app.spec.engine.model_copy(update={"image": moved.new_image, "version": None})
        if engine_for(unstated).version() is None:
            raise ProblemsError(
                [
                    Problem(
                        app.file,
                        "engine.version",
                        f"says {moved.stale_version}, the release inside {moved.old_image}; the "
                        f"tag of {moved.new_image} names no release, so the new image's facts are not known",
                        "give --image a tag that names its release, or edit engine.image and engine.version by hand, "
                        "then bump --minor",
                        rule="bump",
                    )
                ]
            )
    # checked as lint and publish check it, in both generations: the market installs it on either's boxes
    after = _render_text(app.file, moved.text, checked=True)
    old, new = engine_for(app.spec.engine), engine_for(after.spec.engine)
    # what a box gets is measured from the released chart (the base's), not from the spec as it is now: a
    # context cut before the move is part of this release too
    base = repo.base_chart(app.spec.name)
    [diff] = diff_apps(helm, [(app.file, after.spec.version, dict(after.chart))], {app.spec.name: base})
    seen = box_changes(diff, named_only=True) if diff.base_version is not None else None
    text = note or release_note(
        old.title,
        old.version() or _tag(moved.old_image),
        new.version() or _tag(moved.new_image),
        _items(old.args(), old.typed_flags()),
        _items(new.args(), new.typed_flags()),
        seen,
        old.move_notes(new),
    ) + _spare(app, after)
    edit = edit_spec(path, moved.text, part, text, today)
    chart = _render_text(app.file, edit.text).chart
    # what the tables cannot vouch for (a release newer than every table, an image whose CUDA is not known)
    warnings = [str(problem) for problem in after.warnings if problem.rule in _UNVOUCHED]
    warnings += stale_figures(diff)  # "250 t/s at 128K" left beside a context that changed
    if moved.stale_calibration:
        warnings.append(
            f"{app.file}: engine.calibration was measured on {moved.stale_calibration}: commented out "
            f"as stale; fit uses its estimates until `olarespack calibrate {app.file} --log boot.log` "
            f"measures {moved.new_image}"
        )
    return Bump(edit, app.spec.name, chart, text, tuple(warnings))


_UNVOUCHED = frozenset({"engine-release-table", "image-cuda"})
SPARE_SAID_GIB = 0.1  # a change of the GPU memory left over that the note says


def _spare(before: App, after: App) -> str:
    """What the move does to the GPU memory fit leaves over on the box, when it moves by SPARE_SAID_GIB or more
    (a release that takes more for itself leaves the same context less room: 0.75 GiB -> 0.06 GiB)."""
    try:
        was, now = (
            fit_report(app.spec, registry=models_for(app.file), **spec_calibration(app.spec)).headroom_bytes / 2**30
            for app in (before, after)
        )
    except (ModelDataError, UsageError):
        return ""
    if abs(now - was) < SPARE_SAID_GIB:
        return ""
    return f" GPU memory left over by olarespack's fit: {was:.2f} GiB -> {now:.2f} GiB."


def _render_text(file: str, text: str, checked: bool = False) -> App:
    """The spec text rendered as the file it will replace (`checked`: in every generation, as lint does):
    refusals name that file, not a scratch copy."""
    with tempfile.TemporaryDirectory(prefix="olarespack-move-") as tmp:
        candidate = Path(tmp) / Path(file).name
        candidate.write_text(text, encoding="utf-8")
        try:
            [app] = render_apps([candidate], GENERATION_NAMES if checked else None)
        except ProblemsError as exc:
            raise ProblemsError([_as_file(problem, str(candidate), file) for problem in exc.problems]) from None
    return dataclasses.replace(app, file=file, warnings=tuple(_as_file(p, str(candidate), file) for p in app.warnings))


def _as_file(problem: Problem, scratch: str, file: str) -> Problem:
    return dataclasses.replace(
        problem,
        file=problem.file.replace(scratch, file),
        message=problem.message.replace(scratch, file),
        fix=problem.fix.replace(scratch, file),
    )


def _items(args: list[Arg], owners: dict[str, str]) -> dict[str, list[str]]:
    """The command line by the spec field that writes it (the flags one field owns, as the process gets them)."""
    found: dict[str, list[str]] = {}
    for arg in args:
        if arg.flag:
            found.setdefault(owners.get(arg.flag, arg.flag), []).extend(arg.effective_items())
    return found


def _tag(image: str) -> str:
    return image.split("@", 1)[0].rsplit("/", 1)[-1].rsplit(":", 1)[-1]
