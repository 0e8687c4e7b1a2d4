from __future__ import annotations

from pathlib import Path

import pytest

from conftest import tree_bytes
from olarespack.write import changed_files, write_chart, write_file


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


def test_write_file_replaces_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "file.json"
    assert write_file(target, b"one") == "created"
    assert write_file(target, b"one") == "unchanged"
    assert write_file(target, b"two") == "updated"
    assert [p.name for p in target.parent.iterdir()] == ["file.json"] and target.read_bytes() == b"two"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    target.chmod(0o600)  # a spec someone keeps private stays private through a bump
    assert write_file(target, b"three") == "updated"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
