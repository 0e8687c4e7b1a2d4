"""Golden charts: charts/ (the committed output, current generation) and tests/golden/legacy/ (the same
specs rendered for Olares 1.12.3-1.12.5). Rewritten only with `pytest --update-golden`."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from conftest import APP_FILES, CHARTS
from olarespack.olares.generations import GenerationName
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import read_folder, write_chart

GOLDEN = {"current": CHARTS, "legacy": Path(__file__).parent / "golden" / "legacy"}


@pytest.mark.parametrize("generation", ["current", "legacy"])
@pytest.mark.parametrize("spec_file", APP_FILES, ids=lambda p: p.stem)
def test_golden_chart(spec_file: Path, generation: GenerationName, update_golden: bool) -> None:
    spec = load_spec(spec_file)
    chart = render_chart(spec, f"apps/{spec_file.name}", generation)
    folder = GOLDEN[generation] / spec.name
    if update_golden:
        write_chart(chart, folder)
        return
    on_disk = {path: data.decode("utf-8") for path, data in read_folder(folder).items()}
    diff = []
    for path in sorted(set(chart) | set(on_disk)):
        diff += difflib.unified_diff(
            on_disk.get(path, "").splitlines(keepends=True),
            chart.get(path, "").splitlines(keepends=True),
            f"golden/{path}",
            f"rendered/{path}",
        )
    assert not diff, (
        "".join(diff) + "\nIf this change is intended: pytest --update-golden (or `olarespack build` for charts/)"
    )
