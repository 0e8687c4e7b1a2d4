"""helm behind a small interface: the pinned binary found once, its version probed once, then lint,
template and package as subprocess calls. Tests of the code around it can pass a fake."""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from olarespack.core.errors import ToolMissingError
from olarespack.core.yamltext import load_yaml

MINIMUM_VERSION = (3, 19, 0)
# A chart from a stranger runs its templates in helm: a loop over `until 100000000` must end in a message,
# not a machine out of time, memory or disk. Real charts render in well under a second and a few MiB.
TIMEOUT_SECONDS = 300
OUTPUT_LIMIT = 64 * 2**20
# Memory is bounded by RLIMIT_DATA (the writable private mappings Go's heap is made of), not RLIMIT_AS: Go
# reserves address space it never uses, so an address-space cap fails at start-up at random below ~2 GiB.
# helm 3 and 4 lint and render these charts in under 100 MiB of data; 1 GiB leaves a wide margin.
MEMORY_LIMIT = 2**30
# How Go's runtime dies when an allocation is refused: `fatal error: out of memory`, `fatal error: runtime:
# cannot allocate memory`, `fatal error: failed to reserve page summary memory`, ... then every goroutine's stack.
_GO_OUT_OF_MEMORY = re.compile(r"^fatal error: .*(memory|cannot allocate|address space)", re.M)
_GO_CRASH = re.compile(r"^(fatal error|panic): .*$(?=[\s\S]*^goroutine \d+ .*\[)", re.M)


@dataclass(frozen=True)
class HelmResult:
    ok: bool
    stdout: str
    stderr: str
    stopped: str = ""  # the bound that stopped the run: "time", "output" or "memory"


class Helm(Protocol):
    version: str

    def lint(self, chart: Path, values: Path) -> HelmResult: ...

    def lint_many(self, charts: list[Path], values: Path) -> dict[Path, list[str]]: ...

    def template(self, chart: Path, release: str, namespace: str, values: Path) -> HelmResult: ...

    def package(self, chart: Path, destination: Path) -> HelmResult: ...


class HelmBinary:
    """The real helm: `name` (helm = 3.19, helm4 = 4.1) next to the running interpreter (the project venv),
    or on PATH, or an explicit path."""

    def __init__(
        self,
        path: str | None = None,
        name: str = "helm",
        *,
        timeout: float = TIMEOUT_SECONDS,
        output_limit: int = OUTPUT_LIMIT,
        memory_limit: int | None = None,
    ) -> None:
        found = path or find_binary(name)
        if not found:
            raise ToolMissingError(f"{name} not found: run `make build` (it installs the pinned helm into .venv/bin)")
        self.path = found
        self.timeout, self.output_limit = timeout, output_limit
        # no higher than this process may give: helm inherits its hard limit, and a raise would be refused
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        wanted = MEMORY_LIMIT if memory_limit is None else memory_limit
        self.memory_limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
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
        env = {
            **os.environ,
            "HELM_CACHE_HOME": _scratch("cache"),
            "HELM_CONFIG_HOME": _scratch("config"),
            "HELM_DATA_HOME": _scratch("data"),
        }
        # its own process group, so a kill also reaches anything it started (a plugin) that holds its output
        with subprocess.Popen(
            [self.path, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
        ) as proc:
            # Set once exec has succeeded (Popen returns only then), long before helm reads a chart; the
            # processes helm starts inherit it. A preexec_fn would cost a fork of this process per run.
            resource.prlimit(proc.pid, resource.RLIMIT_DATA, (self.memory_limit, self.memory_limit))
            return self._bounded(proc, args[0])

    def _bounded(self, proc: subprocess.Popen[bytes], command: str) -> HelmResult:
        """The run's result, or a failure once it outlives the timeout or prints past the output limit."""
        streams = {"stdout": bytearray(), "stderr": bytearray()}
        over = threading.Event()

        def drain(name: str) -> None:
            pipe = getattr(proc, name)
            while chunk := pipe.read1(1 << 16):
                if len(streams[name]) + len(chunk) > self.output_limit:
                    over.set()
                    _kill_group(proc)
                    return
                streams[name] += chunk

        readers = [threading.Thread(target=drain, args=(name,), daemon=True) for name in streams]
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            return HelmResult(False, "", f"helm {command} did not finish within {self.timeout:g} s", "time")
        finally:
            for reader in readers:
                reader.join()
        if over.is_set():
            return HelmResult(False, "", f"helm {command} printed more than {self.output_limit // 2**20} MiB", "output")
        stderr = streams["stderr"].decode("utf-8", "replace")
        if proc.returncode == 2 and _GO_OUT_OF_MEMORY.search(stderr):  # 2: Go's exit status for a crash
            return HelmResult(
                False, "", f"helm {command} needed more than {self.memory_limit // 2**20} MiB of memory", "memory"
            )
        if proc.returncode == 2 and (crash := _GO_CRASH.search(stderr)):
            # the goroutine dump says nothing to a chart's author and can run to megabytes
            return HelmResult(False, "", f"helm {command} crashed: {crash.group(0)[:300]}")
        return HelmResult(proc.returncode == 0, streams["stdout"].decode("utf-8", "replace"), stderr)

    def lint(self, chart: Path, values: Path) -> HelmResult:
        return self._run("lint", "--strict", "--values", str(values), str(chart))

    def lint_many(self, charts: list[Path], values: Path) -> dict[Path, list[str]]:
        """`helm lint --strict` of several charts in one process (its start-up dominates a lint): the
        [ERROR] and [WARNING] lines of each chart, empty when it passes."""
        out = self._run("lint", "--strict", "--values", str(values), *map(str, charts))
        if out.stopped in ("memory", "output") and len(charts) > 1:
            # one chart stopped the batch, and quickly: lint each alone so the bound is reported on that one
            return {chart: found for one in charts for chart, found in self.lint_many([one], values).items()}
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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        os.killpg(proc.pid, signal.SIGKILL)


def find_binary(name: str) -> str | None:
    beside = Path(sys.executable).absolute().parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


_SCRATCH_KINDS = ("cache", "config", "data")


def _scratch(kind: str) -> str:
    # helm must not read or write the user's repositories and plugins: lint and template need none.
    return str(_scratch_root() / kind)


@functools.cache
def _scratch_root() -> Path:
    """helm's cache, config and data homes: one fixed folder per user in the temporary folder, so the many
    helm runs of a lint (one per chart and command) make no folders and leave none behind. helm reads
    plugins and repository settings from there, so the folder is used only when it is ours alone: a real
    folder (not a link), owned by this user, writable by no one else, and so are the three inside; checked
    once per process. Anything else there (another user made it first, a link, a shared mode) is left
    alone and this process uses a fresh private folder of its own, removed at exit."""
    root = Path(tempfile.gettempdir()) / f"olarespack-helm-{os.getuid()}"
    if _private_folder(root) and all(_private_folder(root / kind) for kind in _SCRATCH_KINDS):
        return root
    fresh = Path(tempfile.mkdtemp(prefix=f"olarespack-helm-{os.getuid()}-"))
    atexit.register(shutil.rmtree, fresh, ignore_errors=True)
    for kind in _SCRATCH_KINDS:
        (fresh / kind).mkdir(mode=0o700)
    return fresh


def _private_folder(path: Path) -> bool:
    """Whether `path` is (or has just been made) a folder of this user's that no one else may write."""
    with contextlib.suppress(OSError):  # there already (a link is not followed), or not ours to make: lstat says
        path.mkdir(mode=0o700)
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


@contextmanager
def values_file(values: dict[str, Any]) -> Iterator[Path]:
    # one private file, not a folder: a lint writes one per helm call, and each folder costs two more syscalls
    handle, name = tempfile.mkstemp(prefix="olarespack-values-", suffix=".yaml")
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(values, sort_keys=True))  # JSON is YAML, and quick
        yield path
    finally:
        path.unlink(missing_ok=True)


def split_rendered(text: str, load: Callable[[str], Any] = load_yaml) -> list[tuple[str, dict[str, Any], str]]:
    """helm template's output as (template path, document, its text) triples; `load` parses one document."""
    documents: list[tuple[str, dict[str, Any], str]] = []
    for chunk in re.split(r"^---\s*$", text, flags=re.M):
        source = re.search(r"^# Source: [^/]+/(.+)$", chunk, re.M)
        document = load(chunk)
        if isinstance(document, dict):
            documents.append((source.group(1) if source else "(rendered)", document, chunk))
    return documents
