"""What lint reads from strangers' charts is bounded: archives are checked from their headers before a byte
is unpacked, chart folders holding links are refused, and an interrupted build's leftovers are not charts."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import CHARTS
from olarespack.cli import main

pytestmark = pytest.mark.helm


def lint(*paths: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["lint", "--no-helm4", *paths], catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr


def archive(path: Path, members: list[tarfile.TarInfo], data: bytes = b"") -> Path:
    """A gzip'd tar whose headers say what the members claim, with at most `data` behind them."""
    raw = io.BytesIO()
    for member in members:
        raw.write(member.tobuf(format=tarfile.GNU_FORMAT))
        raw.write(data)
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def test_an_archive_claiming_512_mib_is_refused_from_its_header(tmp_path: Path) -> None:
    big = tarfile.TarInfo("app/templates/big.yaml")
    big.size = 512 * 2**20
    code, output = lint(str(archive(tmp_path / "bomb.tgz", [tarfile.TarInfo("app/Chart.yaml"), big])))
    assert code == 1 and "[chart-input]" in output and "unpacks larger than a chart may be" in output


def test_an_archive_of_many_files_is_refused(tmp_path: Path) -> None:
    members = [tarfile.TarInfo(f"app/templates/f{i}.yaml") for i in range(2_100)]
    code, output = lint(str(archive(tmp_path / "many.tgz", members)))
    assert code == 1 and "[chart-input]" in output


def test_an_archive_with_a_link_is_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("app/templates/env.yaml")
    link.type, link.linkname = tarfile.SYMTYPE, "/proc/self/environ"
    code, output = lint(str(archive(tmp_path / "link.tgz", [link])))
    assert code == 1 and "is not a regular file or folder" in output


def test_a_chart_folder_with_a_link_is_refused_and_its_neighbours_linted(tmp_path: Path) -> None:
    charts = tmp_path / "charts"
    shutil.copytree(CHARTS, charts)
    os.symlink("/proc/self/environ", charts / "vllmgemma4dflashone/templates/env.yaml")
    os.environ["OLARESPACK_CANARY"] = "canary-value-9f2c"
    try:
        code, output = lint(str(charts))
    finally:
        del os.environ["OLARESPACK_CANARY"]
    assert code == 1 and "canary-value-9f2c" not in output
    assert "charts/vllmgemma4dflashone: templates/env.yaml is a symbolic link" in output
    assert f"ok {charts}/llamacppgemma4audione" in output


def test_leftovers_of_an_interrupted_build_are_not_charts(tmp_path: Path) -> None:
    charts = tmp_path / "charts"
    shutil.copytree(CHARTS, charts)
    shutil.copytree(CHARTS / "llamacppgemma4audione", charts / ".llamacppgemma4audione.olarespack-new")
    code, output = lint(str(charts))
    assert code == 0, output
    assert "olarespack-new" not in output
