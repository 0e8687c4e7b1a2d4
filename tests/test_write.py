from __future__ import annotations

from pathlib import Path

import pytest

from conftest import tree_bytes
from olarespack.write import changed_files, write_chart


def test_create_update_unchanged(tmp_path: Path) -> None:
    folder = tmp_path / "charts/app"
    assert write_chart({"a.yaml": "a\n", "templates/b.yaml": "b\n"}, folder) == "created"
    assert write_chart({"a.yaml": "a\n", "templates/b.yaml": "b\n"}, folder) == "unchanged"
    assert write_chart({"a.yaml": "A\n"}, folder) == "updated"
    assert tree_bytes(folder) == {"a.yaml": b"A\n"}
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == ["app"]


def test_changed_files_lists_extra_and_missing(tmp_path: Path) -> None:
    folder = tmp_path / "app"
    write_chart({"a": "1", "b": "2"}, folder)
    (folder / "extra").write_text("x")
    assert changed_files({"a": "1", "c": "3"}, folder) == ["b", "c", "extra"]


def test_a_failed_write_leaves_the_old_chart(tmp_path: Path) -> None:
    folder = tmp_path / "app"
    write_chart({"a.yaml": "old\n"}, folder)
    # "x" is both a file and a folder: the second write fails half-way through staging
    with pytest.raises(OSError):
        write_chart({"a.yaml": "new\n", "x": "file", "x/y": "inside"}, folder)
    assert tree_bytes(folder) == {"a.yaml": b"old\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app"]
