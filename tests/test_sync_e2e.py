"""An Olares box's sync against `olarespack publish` + `olarespack serve` (real helm, real uvicorn on
127.0.0.1), step by step as beclab/market's syncer does it: hash (stop if unchanged) -> info (keep entries
whose id equals their key, adopt the answer's version) -> details in batches of 10 -> chart download ->
`helm lint --strict` of the downloaded chart with the values Olares injects. For a 1.12.5 and a 1.12.6 box;
then a republish that changes nothing and a bump that changes one app, seen by the running server."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS, tree_bytes
from olarespack.core.chart import Chart
from olarespack.helm import HelmBinary, values_file
from olarespack.market import catalog as market
from olarespack.olares.generations import GenerationName
from olarespack.olares.values import olares_values
from olarespack.project import render_apps
from specs import write_spec
from test_serve import get_json, post_json, publish_market, request, running_server, wait_for

pytestmark = pytest.mark.helm
VISION = "vllmgemma426ba4bvisionone"
BOXES = {"1.12.5": ("legacy", "0.10.0", ">=1.12.3-0,<1.12.6"), "1.12.6": ("current", "0.12.0", ">=1.12.6-0")}


@dataclass
class Box:
    """What a box keeps between syncs."""

    version: str
    local_hash: str = ""
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    charts: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


def sync(base: str, box: Box, charts: bool = True) -> bool:
    """One sync round; False when the hash said nothing changed."""
    box.requests.append("hash")
    remote = get_json(base, f"/api/v1/appstore/hash?version={box.version}")
    if remote["hash"] == box.local_hash:
        return False
    box.requests.append("info")
    info = get_json(base, f"/api/v1/appstore/info?version={box.version}")
    assert info["version"] and info["hash"] == remote["hash"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", info["last_updated"])  # Go's RFC 3339, in ns
    context_version = info["version"]  # the syncer sends this one with its detail requests
    ids = [key for key, app in info["data"]["apps"].items() if app.get("id") == key]
    box.summaries = {key: info["data"]["apps"][key] for key in ids}
    assert ids and info["data"]["tops"]
    for start in range(0, len(ids), 10):
        batch = ids[start : start + 10]
        box.requests.append(f"details {len(batch)}")
        status, _, body = post_json(base, "/api/v1/applications/info", {"app_ids": batch, "version": context_version})
        assert status == 200, body
        answer = json.loads(body)
        assert answer["not_found"] == [] and sorted(answer["apps"]) == sorted(batch)
        box.details.update(answer["apps"])
    for detail in box.details.values() if charts else ():
        target = f"/api/v1/applications/{detail['name']}/chart?fileName={detail['chartName']}&version={context_version}"
        box.requests.append(f"chart {detail['chartName']}")
        status, headers, data = request(base, "GET", target)
        assert status == 200 and headers["content-type"] == "application/gzip"
        box.charts[detail["chartName"]] = data
    box.local_hash = remote["hash"]
    return True


def unpack(data: bytes, into: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tops = {member.name.split("/", 1)[0] for member in tar.getmembers()}
        assert len(tops) == 1, tops
        tar.extractall(into, filter="data")
    return into / tops.pop()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("e2e")
    shutil.copytree(APPS, root / "apps")
    publish_market(root / "apps", root / "market")
    return root


@pytest.fixture(scope="module")
def server(project: Path) -> Any:
    with running_server(project / "market", project / "serve.log", "--poll-seconds", "0.1") as base:
        yield base


@pytest.mark.parametrize("olares", sorted(BOXES))
def test_a_box_syncs_and_installs_the_seed_apps(server: str, project: Path, tmp_path: Path, olares: str) -> None:
    generation, manifest_version, dependency = BOXES[olares]
    catalog = json.loads((project / "market" / market.CATALOG_FILE).read_bytes())["generations"][generation]
    box = Box(olares)
    assert sync(server, box)
    assert box.requests[:3] == ["hash", "info", "details 3"] and len(box.charts) == 3
    assert sorted(d["name"] for d in box.details.values()) == ["llamacppgemma4audione", VISION, "vllmgemma4dflashone"]
    helm = HelmBinary()  # 3.19: the line Olares' app-service is built on
    for detail in box.details.values():
        data = box.charts[detail["chartName"]]
        assert catalog["archives"][detail["chartName"]] == hashlib.sha256(data).hexdigest()
        chart = unpack(data, tmp_path / generation)
        assert chart.name == detail["name"]
        manifest = yaml.safe_load((chart / "OlaresManifest.yaml").read_text(encoding="utf-8"))
        assert manifest["olaresManifest.version"] == manifest_version
        assert str(manifest["metadata"]["version"]) == detail["version"]
        assert detail["options"]["dependencies"][0]["version"] == dependency
        with values_file(olares_values(detail["name"])) as values:
            lint = helm.lint(chart, values)
        assert lint.ok, lint.stdout + lint.stderr
    # the next round stops at the hash, like the box does
    box.requests.clear()
    assert not sync(server, box) and box.requests == ["hash"]


def test_republishing_unchanged_specs_changes_nothing(server: str, project: Path) -> None:
    before = tree_bytes(project / "market")
    hashes = {v: get_json(server, f"/api/v1/appstore/hash?version={v}")["hash"] for v in BOXES}
    publish_market(project / "apps", project / "market")
    assert tree_bytes(project / "market") == before
    assert {v: get_json(server, f"/api/v1/appstore/hash?version={v}")["hash"] for v in BOXES} == hashes


def bump_vision_and_publish(apps: Path, market_dir: Path) -> str:
    """The vision app raised to 9.0.0 and the market published again; its version before."""
    spec = apps / "gemma4-vision.yaml"
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    before = str(data["version"])
    data["version"] = "9.0.0"
    data["changelog"].insert(0, {"version": "9.0.0", "date": dt.date(2027, 6, 1), "note": "a bump for the test"})
    write_spec(apps, data, "gemma4-vision.yaml")
    publish_market(apps, market_dir)
    return before


def test_a_bump_changes_the_hash_and_only_that_app(tmp_path: Path) -> None:
    apps = tmp_path / "apps"
    shutil.copytree(APPS, apps)
    publish_market(apps, tmp_path / "market")
    with running_server(tmp_path / "market", tmp_path / "serve.log", "--poll-seconds", "0.1") as base:
        boxes = {v: Box(v) for v in BOXES}
        for box in boxes.values():
            assert sync(base, box)
        old = {v: (box.local_hash, dict(box.details), dict(box.summaries)) for v, box in boxes.items()}

        before = bump_vision_and_publish(apps, tmp_path / "market")

        vision = market.app_id(VISION)
        for olares, box in boxes.items():
            stale = old[olares][0]
            assert wait_for(
                lambda box=box, stale=stale: (
                    get_json(base, f"/api/v1/appstore/hash?version={box.version}")["hash"] != stale
                )
            )
            assert sync(base, box)
            assert box.details[vision]["version"] == "9.0.0" and f"{VISION}-9.0.0.tgz" in box.charts
            assert box.details[vision]["versionHistory"][0]["mergedAt"] == "2027-06-01T00:00:00.000000000Z"
            for ident, detail in box.details.items():
                if ident != vision:
                    assert detail == old[olares][1][ident]
                    assert box.summaries[ident] == old[olares][2][ident]
            # the old archive stays downloadable, from its own generation
            status, _, archive = request(
                base, "GET", f"/api/v1/applications/{VISION}/chart?fileName={VISION}-{before}.tgz&version={olares}"
            )
            generation = BOXES[olares][0]
            assert status == 200
            assert archive == (tmp_path / "market" / "charts" / generation / f"{VISION}-{before}.tgz").read_bytes()


def test_details_come_in_batches_of_ten(tmp_path: Path) -> None:
    """23 apps (renamed copies of a seed app's rendered chart): three detail batches, nothing missing."""
    gens: tuple[GenerationName, ...] = ("current", "legacy")
    apps: dict[GenerationName, list[market.MarketApp]] = {}
    for gen in gens:
        (seed,) = render_apps([APPS / "gemma4-audio.yaml"], [gen])
        apps[gen] = [
            market.MarketApp(
                seed.file,
                seed.spec.model_copy(update={"name": f"copy{i:02d}"}),
                Chart(f"copy{i:02d}", {p: t.replace(seed.spec.name, f"copy{i:02d}") for p, t in seed.chart.items()}),
                "0" * 64,
                seed.spec.metadata.icon,
            )
            for i in range(23)
        ]
    market_dir = tmp_path / "market"
    market_dir.mkdir()
    (market_dir / market.CATALOG_FILE).write_bytes(market.catalog_bytes(market.build_catalog(apps)))
    with running_server(market_dir, tmp_path / "serve.log") as base:
        box = Box("1.12.6")
        assert sync(base, box, charts=False)  # this market has no archives
        assert [r for r in box.requests if r.startswith("details")] == ["details 10", "details 10", "details 3"]
        assert len(box.details) == 23
