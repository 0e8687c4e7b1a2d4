"""Chart archives (byte-reproducible, checked) and the `package` and `publish` commands on real files."""

from __future__ import annotations

import hashlib
import io
import shutil
import struct
import tarfile
import time
import zlib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import APPS, spec_version, tree_bytes
from olarespack.cli import main
from olarespack.core.errors import PackageError
from olarespack.helm import HelmBinary
from olarespack.market import catalog as market
from olarespack.package import package_chart
from olarespack.project import render_apps
from specs import app_data, write_spec

VISION = "vllmgemma426ba4bvisionone"
V_VISION, V_DFLASH, V_AUDIO = (spec_version(stem) for stem in ("gemma4-vision", "gemma4-dflash", "gemma4-audio"))
ICON_HOST = "https://orales-one-market.aamsellem.workers.dev"
helm_test = pytest.mark.helm


def run(*args: str) -> tuple[int, str, str]:
    """The commands as `olarespack` offers them: through the group that maps errors to exit codes."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def png() -> bytes:
    """A valid 1x1 PNG, so icon tests use a real image file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def apps(tmp_path: Path) -> Path:
    shutil.copytree(APPS, tmp_path / "apps")
    return tmp_path / "apps"


def add_icons(apps: Path) -> None:
    (apps / "icons").mkdir()
    for name in ("llamacppgemma4audione", "vllmgemma4dflashone", VISION):
        (apps / "icons" / f"{name}.png").write_bytes(png())


def members(data: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getmembers()


def read_member(data: bytes, name: str) -> str:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        handle = tar.extractfile(name)
        assert handle is not None
        return handle.read().decode("utf-8")


@helm_test
def test_two_package_runs_give_identical_archives(tmp_path: Path, apps: Path) -> None:
    code, out, _ = run("package", "--apps-dir", str(apps), "--out", str(tmp_path / "a"))
    assert code == 0, out
    time.sleep(1.1)  # a packager that stamps the clock would now write other bytes
    code, _, _ = run("package", "--apps-dir", str(apps), "--out", str(tmp_path / "b"))
    assert code == 0
    first, second = tree_bytes(tmp_path / "a"), tree_bytes(tmp_path / "b")
    assert first == second
    assert sorted(first) == [
        "SHA256SUMS",
        f"llamacppgemma4audione-{V_AUDIO}.tgz",
        f"{VISION}-{V_VISION}.tgz",
        f"vllmgemma4dflashone-{V_DFLASH}.tgz",
    ]
    sums = dict(line.split("  ")[::-1] for line in first["SHA256SUMS"].decode().splitlines())
    assert sums == {name: hashlib.sha256(data).hexdigest() for name, data in first.items() if name.endswith(".tgz")}


@helm_test
def test_an_archive_is_the_chart_folder_with_fixed_times(tmp_path: Path) -> None:
    (app,) = render_apps([APPS / "gemma4-vision.yaml"], ["current"])
    mtime = market.release_epoch(app.spec)
    archive = package_chart(app.chart, VISION, V_VISION, HelmBinary(name="helm4"), mtime)
    assert archive.file_name == f"{VISION}-{V_VISION}.tgz"
    assert archive.data[:2] == b"\x1f\x8b" and struct.unpack("<I", archive.data[4:8]) == (0,)
    found = members(archive.data)
    assert {m.name for m in found} == {f"{VISION}/{path}" for path in app.chart}
    assert {(m.mtime, m.mode, m.uid, m.gid) for m in found} == {(mtime, 0o644, 0, 0)}
    assert mtime == int(market.release_times(app.spec)[0].timestamp())
    for path, text in app.chart.items():
        if path != "Chart.yaml":  # helm re-serializes Chart.yaml: compare its meaning there
            assert read_member(archive.data, f"{VISION}/{path}") == text
    assert yaml.safe_load(read_member(archive.data, f"{VISION}/Chart.yaml")) == yaml.safe_load(app.chart["Chart.yaml"])


@helm_test
def test_helm3_archives_are_refused_because_they_carry_the_clock() -> None:
    (app,) = render_apps([APPS / "gemma4-audio.yaml"], ["current"])
    with pytest.raises(PackageError, match="stamped"):
        package_chart(app.chart, app.spec.name, app.spec.version, HelmBinary(name="helm"), 0)


@helm_test
def test_olares_version_picks_the_generation(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, _ = run("package", str(APPS / "gemma4-vision.yaml"), "--olares-version", "1.12.5", "--out", str(out))
    assert code == 0
    manifest = read_member((out / f"{VISION}-{V_VISION}.tgz").read_bytes(), f"{VISION}/OlaresManifest.yaml")
    assert "olaresManifest.version: '0.10.0'" in manifest


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    code, _, err = run("package", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "out"))
    assert code == 2 and "no such spec file" in err
    code, _, err = run(
        "package", str(APPS / "gemma4-vision.yaml"), "--olares-version", "one", "--out", str(tmp_path / "out")
    )
    assert code == 2 and "not a version" in err
    code, _, err = run(
        "publish", "--apps-dir", str(APPS), "--market-dir", str(tmp_path / "m"), "--base-url", "ftp://market"
    )
    assert code == 2 and "--base-url" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "m").exists()


def test_a_bad_spec_is_named_with_its_field(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["max_model_len"] = "lots"
    spec = write_spec(tmp_path, data)
    code, _, err = run("package", str(spec), "--out", str(tmp_path / "out"))
    assert code == 1
    assert f"{spec}: engine.max_model_len" in err
    code, _, err = run("publish", str(spec), "--market-dir", str(tmp_path / "market"))
    assert code == 1 and f"{spec}: engine.max_model_len" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "market").exists()


@helm_test
def test_a_published_version_never_changes(tmp_path: Path, apps: Path) -> None:
    market_dir = tmp_path / "market"
    assert run("publish", "--apps-dir", str(apps), "--market-dir", str(market_dir))[0] == 0
    before = tree_bytes(market_dir)
    spec = apps / "gemma4-vision.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_num_seqs: 4", "max_num_seqs: 2"), encoding="utf-8")
    code, _, err = run("publish", "--apps-dir", str(apps), "--market-dir", str(market_dir))
    assert code == 1
    assert f"{spec}: version: {V_VISION} is already published" in err and "bump version" in err
    assert "[published-version]" in err
    assert tree_bytes(market_dir) == before


@helm_test
def test_icons_served_by_the_market_must_exist_locally(tmp_path: Path, apps: Path) -> None:
    market_dir = tmp_path / "market"
    code, _, err = run("publish", "--apps-dir", str(apps), "--market-dir", str(market_dir), "--base-url", ICON_HOST)
    assert code == 1
    assert err.count("metadata.icon") == 3 and f"add the icon as {apps}/icons/{VISION}.png" in err
    assert err.count("[icon-file]") == 3
    assert not market_dir.exists()
    add_icons(apps)
    code, out, _ = run("publish", "--apps-dir", str(apps), "--market-dir", str(market_dir), "--base-url", ICON_HOST)
    assert code == 0, out
    assert (market_dir / "icons" / f"{VISION}.png").read_bytes() == png()
    assert len([p for p in (market_dir / "icons").iterdir() if p.name != "SHA256SUMS"]) == 3
    assert len((market_dir / "icons" / "SHA256SUMS").read_text(encoding="utf-8").splitlines()) == 3


@helm_test
def test_publish_writes_a_self_contained_market(tmp_path: Path, apps: Path) -> None:
    market_dir = tmp_path / "market"
    code, out, _ = run("publish", "--apps-dir", str(apps), "--market-dir", str(market_dir))
    assert code == 0
    assert out.count("(created)") == 6 and "catalog.json created" in out
    files = sorted(tree_bytes(market_dir))
    for gen in ("current", "legacy"):
        assert f"charts/{gen}/{VISION}-{V_VISION}.tgz" in files
        assert f"static/{gen}/api/v1/appstore/info" in files and f"static/{gen}/api/v2/appstore/hash" in files
    sums = (market_dir / "charts/SHA256SUMS").read_text().splitlines()
    assert len(sums) == 6 and all(line.split("  ")[1].startswith(("current/", "legacy/")) for line in sums)
    catalog = (market_dir / "catalog.json").read_bytes()
    legacy = market_dir / f"charts/legacy/{VISION}-{V_VISION}.tgz"
    assert "'0.10.0'" in read_member(legacy.read_bytes(), f"{VISION}/OlaresManifest.yaml")
    assert hashlib.sha256(legacy.read_bytes()).hexdigest().encode() in catalog


def test_publish_gate_is_the_full_lint(tmp_path: Path) -> None:
    bad = Path(__file__).parent / "bad-specs" / "gemma4-flash-attn.yaml"
    code, _, err = run("publish", str(bad), "--market-dir", str(tmp_path / "m"))
    assert code == 1 and f"FAIL {bad}: engine.attention_backend" in err and "[gemma4-flash-attn]" in err
    assert not (tmp_path / "m").exists()


def test_archives_know_nothing_of_the_market() -> None:
    """package.py makes reproducible archives; the market folder they go into is market/'s, which imports
    package, never the other way round (no import cycle between the two)."""
    import ast

    import olarespack.package

    tree = ast.parse(Path(olarespack.package.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    assert not {name for name in imported if name.startswith("olarespack.market")}
    assert not hasattr(olarespack.package, "write_market")
