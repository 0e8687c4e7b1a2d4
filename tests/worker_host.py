"""The exported Cloudflare Worker under Cloudflare's own local runtime: the pinned wrangler (tools/worker,
installed by `make unit`) running `wrangler dev --local` on 127.0.0.1, offline, with no account."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from conftest import ROOT
from test_serve import HOST, free_port, request

ENV_VAR = "OLARESPACK_WRANGLER"
LOCAL_WRANGLER = ROOT / "tools/worker/node_modules/.bin/wrangler"


def wrangler_binary() -> Path:
    """The pinned wrangler: $OLARESPACK_WRANGLER (make unit sets it, so there it must exist), else the one
    `make unit` installs; a clone where neither is installed skips, saying how to get it."""
    named = os.environ.get(ENV_VAR)
    if named:
        assert Path(named).is_file(), f"{ENV_VAR}={named} does not exist (make unit installs it)"
        found = Path(named)
    elif LOCAL_WRANGLER.is_file():
        found = LOCAL_WRANGLER
    else:
        pytest.skip(
            f"wrangler is not installed: `make unit` installs the pinned one into {LOCAL_WRANGLER.parent}"
            f" (or set {ENV_VAR})"
        )
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: wrangler runs on Node.js 20 or later")
    return found


def offline_env(scratch: Path) -> dict[str, str]:
    """wrangler with no account, no metrics and no user config: what runs here runs the same in CI."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDFLARE_", "CF_", "WRANGLER_"))}
    scratch.mkdir(parents=True, exist_ok=True)
    env.update(
        WRANGLER_SEND_METRICS="false",
        XDG_CONFIG_HOME=str(scratch),
        WRANGLER_LOG_PATH=str(scratch),
        CI="1",
        NO_COLOR="1",
    )
    return env


def run_wrangler(worker_dir: Path, scratch: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(wrangler_binary()), *args],
        cwd=worker_dir,
        env=offline_env(scratch),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def running_worker(worker_dir: Path, log: Path) -> Iterator[str]:
    """`wrangler dev --local` on the exported folder, on a free loopback port, until /health answers 200;
    stopped (with the workerd it started: its own process group) on exit."""
    wrangler = wrangler_binary()
    for _ in range(3):  # another process may take the free port before wrangler binds it
        port = free_port()
        with log.open("ab") as sink:
            proc = subprocess.Popen(
                [
                    str(wrangler),
                    "dev",
                    "--local",
                    "--ip",
                    HOST,
                    "--port",
                    str(port),
                    "--inspector-port",
                    str(free_port()),
                    "--show-interactive-dev-session=false",
                ],
                cwd=worker_dir,
                env=offline_env(log.parent / "wrangler-home"),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        base = f"http://{HOST}:{port}"
        try:
            if _wait_ready(base, proc):
                yield base
                return
        finally:
            stop_group(proc)
    raise AssertionError(f"wrangler dev did not start:\n{log.read_text(errors='replace')[-4000:]}")


def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if request(base, "GET", "/health")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group this test started (wrangler and its workerd), SIGKILL after 10 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # workerd may outlive its parent
    proc.wait()
