"""Olares' chart rules, helm and Kubernetes schemas, each shown failing on a chart folder broken in one
place (a hand-written chart, as `olarespack lint` sees it) and passing on the generated charts."""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import CHARTS
from olarespack.check.lint import lint
from olarespack.helm import HelmBinary

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def helms() -> list[HelmBinary]:
    return [HelmBinary(name="helm"), HelmBinary(name="helm4")]


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def broken(tmp_path: Path, app: str, change: Callable[[Path], None]) -> Path:
    folder = tmp_path / app
    shutil.copytree(CHARTS / app, folder)
    change(folder)
    return folder


VISION = "vllmgemma426ba4bvisionone"
AUDIO = "llamacppgemma4audione"
M = "OlaresManifest.yaml"
D = "templates/deployment.yaml"

CASES: list[tuple[str, str, Callable[[Path], None], str, str]] = [
    ("olares-files", VISION, lambda f: (f / M).unlink(), M, ""),
    ("olares-manifest-template", VISION, lambda f: edit(f / M, "apiTimeout: 0", "apiTimeout: {{ .Values.x }}"),
     M, "line"),
    ("olares-name", VISION, lambda f: edit(f / M, f"  name: {VISION}", "  name: other"), M, "metadata.name"),
    ("olares-version", VISION, lambda f: edit(f / M, "  version: '1.0.5'", "  version: '1.0.6'"), M,
     "metadata.version"),
    ("olares-title", VISION, lambda f: edit(f / M, '  title: "Gemma 4 26B Vision One"', '  title: ""'), M,
     "metadata.title"),
    ("olares-description", VISION, lambda f: edit(f / M, "  description: \"Gemma", "  summary: \"Gemma"), M,
     "metadata.description"),
    ("olares-icon", VISION, lambda f: edit(f / M, '  icon: "https://', '  icon: "ftp://'), M, "metadata.icon"),
    ("olares-categories", VISION, lambda f: edit(f / M, '  categories:\n    - "AI"\n', "  categories: []\n"), M,
     "metadata.categories"),
    ("olares-entrances", VISION, lambda f: edit(f / M, "    port: 8000", "    port: 0"), M, "entrances[0].port"),
    ("olares-entrance-title", VISION, lambda f: edit(f / M, '    title: "Gemma 4 26B Vision"',
                                                      '    title: "Gemma 4 26B Vision for every Olares box"'),
     M, "entrances[0].title"),
    ("olares-accelerator", VISION, lambda f: edit(f / M, 'limitedCpu: "16"', 'limitedCpu: "2"'), M,
     "spec.accelerator[0].limitedCpu"),
    ("olares-permission", VISION, lambda f: edit(f / M, "  appData: true", "  appData: false"), M,
     "permission.appData"),
    ("olares-generation", VISION, lambda f: edit(f / M, "olaresManifest.version: '0.12.0'",
                                                 "olaresManifest.version: '0.10.0'"), M, "olaresManifest.version"),
    ("olares-dependency", VISION, lambda f: edit(f / M, "'>=1.12.6-0'", "'>=1.12.3-0'"), M, "options.dependencies"),
    ("olares-user-env", VISION, lambda f: edit(f / M, "envName: OLARES_SYSTEM_HUGGINGFACE_SERVICE",
                                               "envName: OLARES_USER_HUGGINGFACE_SERVICE"), M, "envs"),
    ("olares-workload-replicas", VISION, lambda f: edit(f / "values.yaml", "replicaCount: 1", "replicas: 1"),
     "values.yaml", f"workloads.{VISION}.replicaCount"),
    ("olares-deployment", VISION, lambda f: edit(f / D, f"  name: {VISION}\n", "  name: engine\n"), "templates",
     "Deployment"),
    ("olares-namespace", VISION, lambda f: edit(f / "templates/service.yaml", 'namespace: "{{ .Release.Namespace }}"',
                                                "namespace: default"), "templates/service.yaml",
     f"Service/{VISION}.metadata.namespace"),
    ("olares-hostpath-recreate", VISION, lambda f: edit(f / D, "type: Recreate", "type: RollingUpdate"), D,
     f"Deployment/{VISION}.spec.strategy"),
    ("olares-container-resources", VISION, lambda f: edit(f / D, '              memory: "24Gi"\n', ""), D,
     f"Deployment/{VISION}.spec.template.spec.containers[0].resources"),
    ("olares-resource-sums", VISION, lambda f: edit(f / D, 'memory: "24Gi"', 'memory: "30Gi"'), M,
     "spec.accelerator[0].requiredMemory"),
    ("gpumem-bare-mib", VISION, lambda f: edit(f / D, "nvidia.com/gpumem: 24400", 'nvidia.com/gpumem: "23Gi"'), D,
     f"Deployment/{VISION}.spec.template.spec.containers[0].resources.requests.nvidia.com/gpumem"),
    ("olares-privileged", VISION, lambda f: edit(f / D, "          ports:\n",
                                                 "          securityContext:\n            privileged: true\n"
                                                 "          ports:\n"), D,
     f"Deployment/{VISION}.spec.template.spec.containers[0].securityContext"),
    ("secret-outside-secret", VISION, lambda f: edit(f / D, """              valueFrom:
                secretKeyRef:
                  name: vllmgemma426ba4bvisionone-hf
                  key: HF_TOKEN
                  optional: true""", """              value: {{ get .Values.olaresEnv "HF_TOKEN" | quote }}"""), D,
     f"Deployment/{VISION}"),
    ("helm-lint", VISION, lambda f: edit(f / "Chart.yaml", "apiVersion: v2", "apiVersion: v9"), "", ""),
    ("helm-template", AUDIO, lambda f: edit(f / "templates/service.yaml", "  ports:", "  ports: {{ fail \"no\" }}"),
     "", ""),
    ("kube-schema", AUDIO, lambda f: edit(f / "templates/service.yaml", "port: 8080", "port: eighty"),
     "templates/service.yaml", f"Service/{AUDIO}.spec.ports.0.port"),
]


@pytest.mark.parametrize(("rule", "app", "change", "file", "path"), CASES, ids=[c[0] for c in CASES])
def test_rule_fails_on_a_broken_chart(tmp_path: Path, helms: list[HelmBinary], rule: str, app: str,
                                      change: Callable[[Path], None], file: str, path: str) -> None:
    folder = broken(tmp_path, app, change)
    report = lint([str(folder)], helms)
    hits = [p for p in report.errors if p.rule == rule]
    assert hits, [str(p) for p in report.problems]
    where = str(folder) + (f"/{file}" if file else "")
    assert any(p.file == where and p.path.startswith(path) for p in hits), [str(p) for p in hits]


def test_generated_charts_and_official_references_lint_clean(helms: list[HelmBinary]) -> None:
    report = lint([str(CHARTS), str(REFERENCE / "official-v3")], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    assert len(report.checked) == 5


def test_seed_author_charts_show_their_real_problems(helms: list[HelmBinary]) -> None:
    report = lint([str(REFERENCE / "seed-market")], helms)
    found = {(p.file.split("seed-market/", 1)[1].split("/", 1)[0], p.rule) for p in report.errors}
    for app in ("vllmgemma426ba4bvisionone", "vllmgemma4dflashone"):
        assert (app, "olares-resource-sums") in found  # 24Gi requested, 4Gi declared
        assert (app, "secret-outside-secret") in found  # HF_TOKEN as a plain value


def test_packaged_charts_are_linted_too(tmp_path: Path, helms: list[HelmBinary]) -> None:
    archive = tmp_path / f"{AUDIO}-1.0.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(CHARTS / AUDIO, arcname=AUDIO)
    assert lint([str(archive)], helms).errors == []
    broken_folder = broken(tmp_path / "b", AUDIO, lambda f: edit(f / "templates/service.yaml", "port: 8080",
                                                                 "port: eighty"))
    with tarfile.open(tmp_path / "broken.tgz", "w:gz") as tar:
        tar.add(broken_folder, arcname=AUDIO)
    assert {p.rule for p in lint([str(tmp_path / "broken.tgz")], helms).errors} == {"kube-schema"}
