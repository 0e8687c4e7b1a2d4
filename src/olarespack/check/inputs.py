"""What lint reads from the command line: specs, chart folders, folders of charts, chart archives, each
within Helm's own limits (a stranger's chart cannot make lint read gigabytes or another file of the
machine). A chart lint refuses to read is that chart's problem, not the end of the run."""

from __future__ import annotations

import functools
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem, UsageError
from olarespack.write import is_leftover

# Helm's own loader refuses charts over 100 MiB unpacked and files over 5 MiB; a chart holds a few dozen files.
MAX_CHART_BYTES = 100 * 2**20
MAX_FILE_BYTES = 5 * 2**20
MAX_CHART_FILES = 2_000
MAX_ARCHIVE_BYTES = 20 * 2**20


@dataclass
class Target:
    """A chart to lint and the folder on disk helm reads it from."""

    chart: Chart
    folder: Path


class ChartInputError(Exception):
    """A chart lint refuses to read: too big, too many files, or links. Reported as that input's problem."""

    def __init__(self, label: str, message: str) -> None:
        super().__init__(message)
        self.problem = Problem(
            label,
            "",
            message,
            "lint the chart as Helm would load it: regular files, within Helm's size limits",
            rule="chart-input",
        )


def read_chart(folder: Path, label: str) -> Chart:
    """The chart's files as text, within Helm's size limits; symbolic links are refused, so a stranger's
    chart cannot make lint (and helm) read another file of the machine."""
    files: dict[str, str] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            raise ChartInputError(label, f"{relative} is a symbolic link; charts must hold regular files")
        if not path.is_file():
            continue
        size = path.stat().st_size
        total += size
        if len(files) >= MAX_CHART_FILES or size > MAX_FILE_BYTES or total > MAX_CHART_BYTES:
            raise ChartInputError(
                label,
                f"larger than a chart may be ({MAX_CHART_FILES} files, "
                f"{MAX_FILE_BYTES // 2**20} MiB a file, {MAX_CHART_BYTES // 2**20} MiB in all)",
            )
        files[relative] = path.read_bytes().decode("utf-8", errors="replace")
    return Chart(folder.name, files, label)


def classify(paths: list[str], stack: ExitStack) -> tuple[list[Path], list[Target], list[Problem]]:
    """Inputs as specs and charts; a chart lint refuses to read is that chart's problem, not the run's end."""
    specs: list[Path] = []
    charts: list[Target] = []
    refused: list[Problem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file() and path.suffix in (".yaml", ".yml"):
            specs.append(path)
            continue
        loaders: list[Callable[[], Target]]
        if path.is_file() and path.name.endswith((".tgz", ".tar.gz")):
            loaders = [functools.partial(_extract, path, stack)]
        elif path.is_dir() and (path / "Chart.yaml").is_file():
            loaders = [functools.partial(_folder_target, path, raw.rstrip("/"))]
        elif path.is_dir() and _chart_folders(path):
            loaders = [
                functools.partial(_folder_target, folder, f"{raw.rstrip('/')}/{folder.name}")
                for folder in _chart_folders(path)
            ]
        else:
            raise UsageError(f"{raw}: not a spec (.yaml), a chart folder, a folder of charts or a chart .tgz")
        for load in loaders:
            try:
                charts.append(load())
            except ChartInputError as exc:
                refused.append(exc.problem)
    return specs, charts, refused


def _folder_target(folder: Path, label: str) -> Target:
    return Target(read_chart(folder, label), folder)


def _chart_folders(folder: Path) -> list[Path]:
    """The charts in a folder of charts; hidden folders (an interrupted build's leftovers) are not charts."""
    return [
        p.parent
        for p in sorted(folder.glob("*/Chart.yaml"))
        if p.is_file() and not p.parent.name.startswith(".") and not is_leftover(p.parent)
    ]


def _extract(archive: Path, stack: ExitStack) -> Target:
    """Unpack a chart archive after reading its headers: sizes, count and member kinds are checked before a
    byte is written, so a small archive cannot unpack into gigabytes."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="olarespack-tgz-")))
    if archive.stat().st_size > MAX_ARCHIVE_BYTES:
        raise ChartInputError(str(archive), f"larger than {MAX_ARCHIVE_BYTES // 2**20} MiB")
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            members: list[tarfile.TarInfo] = []
            total = 0
            for member in tar:
                if member.issym() or member.islnk() or not (member.isfile() or member.isdir()):
                    raise ChartInputError(str(archive), f"{member.name} is not a regular file or folder")
                total += member.size
                members.append(member)
                if len(members) > MAX_CHART_FILES or member.size > MAX_FILE_BYTES or total > MAX_CHART_BYTES:
                    raise ChartInputError(
                        str(archive),
                        f"unpacks larger than a chart may be ({MAX_CHART_FILES} "
                        f"files, {MAX_FILE_BYTES // 2**20} MiB a file, "
                        f"{MAX_CHART_BYTES // 2**20} MiB in all)",
                    )
            tar.extractall(tmp, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"{archive}: not a readable chart archive ({exc})") from None
    folders = [p.parent for p in tmp.glob("*/Chart.yaml")]
    if len(folders) != 1:
        raise UsageError(f"{archive}: expected one top folder holding Chart.yaml")
    return Target(read_chart(folders[0], str(archive)), folders[0])
