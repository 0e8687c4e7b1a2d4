"""helm behind a small interface: the pinned binary found once, its version probed once, then lint,
template and package as subprocess calls. Tests of the code around it can pass a fake."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from olarespack.errors import ToolMissingError
from olarespack.yamltext import load_yaml

MINIMUM_VERSION = (3, 19, 0)


@dataclass(frozen=True)
class HelmResult:
    ok: bool
    stdout: str
    stderr: str


class Helm(Protocol):
    version: str

    def lint(self, chart: Path, values: Path) -> HelmResult: ...

    def lint_many(self, charts: list[Path], values: Path) -> dict[Path, list[str]]: ...

    def template(self, chart: Path, release: str, namespace: str, values: Path) -> HelmResult: ...

    def package(self, chart: Path, destination: Path) -> HelmResult: ...


class HelmBinary:
    """The real helm: `name` (helm = 3.19, helm4 = 4.1) next to the running interpreter (the project venv),
    or on PATH, or an explicit path."""

    def __init__(self, path: str | None = None, name: str = "helm") -> None:
        found = path or find_binary(name)
        if not found:
            raise ToolMissingError(f"{name} not found: run `make build` (it installs the pinned helm into .venv/bin)")
        self.path = found
        self.version = self._probe_version()

    def _probe_version(self) -> str:
        try:
            out = self._run("version", "--template", "{{.Version}}")
        except OSError as exc:
            raise ToolMissingError(f"{self.path}: cannot run helm: {exc}") from None
        match = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.stdout.strip())
        if not out.ok or not match:
            raise ToolMissingError(f"{self.path}: not a helm binary ({out.stderr.strip() or out.stdout.strip()})")
        if tuple(int(x) for x in match.groups()) < MINIMUM_VERSION:
            raise ToolMissingError(f"{self.path}: helm {out.stdout.strip()} is older than v3.19.0")
        return out.stdout.strip()

    def _run(self, *args: str) -> HelmResult:
        env = {**os.environ, "HELM_CACHE_HOME": _scratch("cache"), "HELM_CONFIG_HOME": _scratch("config"),
               "HELM_DATA_HOME": _scratch("data")}
        proc = subprocess.run([self.path, *args], capture_output=True, text=True, env=env, check=False)
        return HelmResult(proc.returncode == 0, proc.stdout, proc.stderr)

    def lint(self, chart: Path, values: Path) -> HelmResult:
        return self._run("lint", "--strict", "--values", str(values), str(chart))

    def lint_many(self, charts: list[Path], values: Path) -> dict[Path, list[str]]:
        """`helm lint --strict` of several charts in one process (its start-up dominates a lint): the
        [ERROR] and [WARNING] lines of each chart, empty when it passes."""
        out = self._run("lint", "--strict", "--values", str(values), *map(str, charts))
        findings: dict[Path, list[str]] = {chart: [] for chart in charts}
        by_name = {str(chart): chart for chart in charts}
        current: Path | None = None
        for line in out.stdout.splitlines():
            if line.startswith("==> Linting "):
                current = by_name.get(line.removeprefix("==> Linting ").strip())
            elif current is not None and line.startswith(("[ERROR]", "[WARNING]")):
                findings[current].append(line)
        if not out.ok and not any(findings.values()):
            for chart in charts:  # helm failed before linting any chart: report its error on each
                findings[chart].append(out.stderr.strip() or out.stdout.strip())
        return findings

    def template(self, chart: Path, release: str, namespace: str, values: Path) -> HelmResult:
        return self._run("template", release, str(chart), "--namespace", namespace, "--values", str(values))

    def package(self, chart: Path, destination: Path) -> HelmResult:
        return self._run("package", str(chart), "--destination", str(destination))


def find_binary(name: str) -> str | None:
    beside = Path(sys.executable).absolute().parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def _scratch(kind: str) -> str:
    # helm must not read or write the user's repositories and plugins: lint and template need none.
    path = Path(tempfile.gettempdir()) / f"olarespack-helm-{os.getuid()}" / kind
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


@contextmanager
def values_file(values: dict[str, Any]) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="olarespack-values-") as tmp:
        path = Path(tmp) / "values.yaml"
        path.write_text(json.dumps(values, sort_keys=True), encoding="utf-8")  # JSON is YAML, and quick
        yield path


def split_rendered(text: str) -> list[tuple[str, dict[str, Any], str]]:
    """helm template's output as (template path, document, its text) triples."""
    documents: list[tuple[str, dict[str, Any], str]] = []
    for chunk in re.split(r"^---\s*$", text, flags=re.M):
        source = re.search(r"^# Source: [^/]+/(.+)$", chunk, re.M)
        document = load_yaml(chunk)
        if isinstance(document, dict):
            documents.append((source.group(1) if source else "(rendered)", document, chunk))
    return documents
