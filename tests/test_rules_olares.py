"""Olares' chart rules, helm and Kubernetes schemas, each shown failing on a chart folder broken in one
place (a hand-written chart, as `olarespack lint` sees it) and passing on the generated charts."""

from __future__ import annotations

import re
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import CHARTS, shared
from olarespack.check.lint import lint
from olarespack.core.errors import Problem
from olarespack.helm import HelmBinary

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

SERVICE_ACCOUNT = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: lister
  namespace: "{{ .Release.Namespace }}"
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "{{ .Release.Namespace }}-nodes"
rules:
  - apiGroups: ["*"]
    resources: ["nodes"]
    verbs: ["patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: "{{ .Release.Namespace }}-nodes"
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: "{{ .Release.Namespace }}-nodes"
subjects:
  - kind: ServiceAccount
    name: lister
    namespace: "{{ .Release.Namespace }}"
"""


def add(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def new_version(folder: Path) -> None:
    """metadata.version one patch above Chart.yaml's."""
    version = re.search(r"^version: \"?([0-9.]+)", (folder / "Chart.yaml").read_text(encoding="utf-8"), re.M)
    assert version
    major, minor, patch = version.group(1).split(".")
    edit(folder / M, f"  version: '{version.group(1)}'", f"  version: '{major}.{minor}.{int(patch) + 1}'")


def workload_options(allow: str, replicas: int = 1) -> Callable[[Path], None]:
    """A workloadOptions entry for the app's Deployment appended to its manifest (a top-level field)."""

    def change(folder: Path) -> None:
        manifest = folder / M
        manifest.write_text(
            manifest.read_text(encoding="utf-8") + f"workloadOptions:\n  {VISION}:\n"
            f"    replicas: {replicas}\n    allow:\n{allow}",
            encoding="utf-8",
        )

    return change


VIDEO = "      - type: device.video\n        containers: [vllm]\n"
MULTIPLE = ("  apiTimeout: 0", "  apiTimeout: 0\n  allowMultipleInstall: true")
FIXED_ROLE = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vision-reader
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get"]
"""


def fixed_cluster_role(folder: Path) -> None:
    edit(folder / M, *MULTIPLE)
    edit(folder / D, f"  name: {VISION}\n", "  name: {{ .Release.Name }}\n")
    add(folder / "templates/role.yaml", FIXED_ROLE)


POD = f"Deployment/{VISION}.spec.template.spec.containers[0]"
# (rule, app, change, file the problem is reported on, field path it starts with, severity)
CASES: list[tuple[str, str, Callable[[Path], None], str, str, str]] = [
    ("olares-files", VISION, lambda f: (f / M).unlink(), M, "", "error"),
    (
        "olares-manifest-template",
        VISION,
        lambda f: edit(f / M, "apiTimeout: 0", "apiTimeout: {{ .Values.x }}"),
        M,
        "line",
        "error",
    ),
    ("olares-name", VISION, lambda f: edit(f / M, f"  name: {VISION}", "  name: other"), M, "metadata.name", "error"),
    ("olares-version", VISION, new_version, M, "metadata.version", "error"),
    (
        "olares-api-version",
        VISION,
        lambda f: edit(f / M, "apiVersion: 'v3'", "apiVersion: 'v7'"),
        M,
        "apiVersion",
        "error",
    ),
    (
        "olares-title",
        VISION,
        lambda f: edit(f / M, '  title: "Gemma 4 26B Vision One"', '  title: ""'),
        M,
        "metadata.title",
        "error",
    ),
    (
        "olares-description",
        VISION,
        lambda f: edit(f / M, '  description: "Gemma', '  summary: "Gemma'),
        M,
        "metadata.description",
        "error",
    ),
    ("olares-icon", VISION, lambda f: edit(f / M, '  icon: "https://', '  icon: "ftp://'), M, "metadata.icon", "error"),
    (
        "olares-categories",
        VISION,
        lambda f: edit(f / M, '  categories:\n    - "AI"\n', "  categories: []\n"),
        M,
        "metadata.categories",
        "warning",
    ),
    (
        "olares-taxonomy",
        VISION,
        lambda f: edit(f / M, "  locale:\n    - en-US", "  locale:\n    - en-us"),
        M,
        "spec.locale[0]",
        "error",
    ),
    (
        "olares-entrances",
        VISION,
        lambda f: edit(f / M, "    port: 8000", "    port: -1"),
        M,
        "entrances[0].port",
        "error",
    ),
    (
        "olares-entrance-title",
        VISION,
        lambda f: edit(
            f / M, '    title: "Gemma 4 26B Vision"', '    title: "Gemma 4 26B Vision for every Olares box"'
        ),
        M,
        "entrances[0].title",
        "error",
    ),
    ("olares-spec", VISION, lambda f: edit(f / M, "\nspec:\n", "\nspecification:\n"), M, "spec", "error"),
    (
        "olares-support-arch",
        VISION,
        lambda f: edit(f / M, "  supportArch:\n    - amd64", "  supportArch:\n    - mips"),
        M,
        "spec.supportArch[0]",
        "error",
    ),
    (
        "olares-accelerator",
        VISION,
        lambda f: edit(f / M, 'limitedCpu: "16"', 'limitedCpu: "2"'),
        M,
        "spec.accelerator[0].limitedCpu",
        "error",
    ),
    (
        "olares-accelerator",
        VISION,
        lambda f: edit(f / M, 'limitedCpu: "16"', 'limitedCpu: "16"\n      supportMultiCard: true'),
        M,
        "spec.accelerator[0].supportMultiCard",
        "warning",
    ),
    (
        "olares-accelerator",
        VISION,
        lambda f: edit(f / M, 'limitedCpu: "16"', 'limitedCpu: "16"\n      supportMultiCards: "yes"'),
        M,
        "spec.accelerator[0].supportMultiCards",
        "error",
    ),
    (
        "olares-workload-options",
        VISION,
        workload_options("      - type: folder\n        containers: [vllm, ghost]\n"),
        M,
        f"workloadOptions.{VISION}.allow[0].containers",
        "error",
    ),
    (
        "olares-workload-options",
        VISION,
        workload_options(VIDEO, replicas=2),
        M,
        f"workloadOptions.{VISION}.replicas",
        "error",
    ),
    (
        "olares-workload-options",
        VISION,
        lambda f: (workload_options(VIDEO)(f), edit(f / D, "type: Recreate", "type: RollingUpdate")),
        "templates",
        f"Deployment/{VISION}.spec.strategy.type",
        "error",
    ),
    (
        "gpu-memory-generation",
        VISION,
        lambda f: edit(f / M, "olaresManifest.version: '0.12.0'", "olaresManifest.version: '0.11.0'"),
        M,
        "spec.accelerator[0].requiredGPUMemory",
        "warning",
    ),
    (
        "olares-options",
        VISION,
        lambda f: edit(f / M, "  apiTimeout: 0", "  apiTimeout: 0\n  templateOnly: true"),
        M,
        "options.allowMultipleInstall",
        "error",
    ),
    (
        "olares-subcharts",
        VISION,
        lambda f: edit(f / M, "apiVersion: 'v3'", "apiVersion: 'v2'"),
        M,
        "spec.subCharts",
        "error",
    ),
    (
        "olares-permission",
        VISION,
        lambda f: edit(f / M, "  appData: true", "  appData: false"),
        M,
        "permission.appData",
        "error",
    ),
    (
        "olares-dependency",
        VISION,
        lambda f: edit(f / M, "'>=1.12.6-0'", "'>=1.12.3-0'"),
        M,
        "options.dependencies",
        "error",
    ),
    (
        "olares-user-env",
        VISION,
        lambda f: edit(f / M, "  - envName: HF_ENDPOINT", "  - envName: OLARES_USER_HF"),
        M,
        "envs[0].envName",
        "error",
    ),
    (
        "olares-workload-replicas",
        VISION,
        lambda f: edit(f / "values.yaml", "replicaCount: 1", "replicas: 1"),
        "values.yaml",
        f"workloads.{VISION}.replicaCount",
        "error",
    ),
    (
        "olares-upload",
        VISION,
        lambda f: edit(f / M, "  apiTimeout: 0", "  apiTimeout: 0\n  upload:\n    dest: /data"),
        M,
        "options.upload.dest",
        "error",
    ),
    (
        "olares-deployment",
        VISION,
        lambda f: edit(f / D, f"  name: {VISION}\n", "  name: engine\n"),
        "templates",
        "",
        "error",
    ),
    (
        "olares-namespace",
        VISION,
        lambda f: edit(f / "templates/service.yaml", 'namespace: "{{ .Release.Namespace }}"', "namespace: default"),
        "templates/service.yaml",
        f"Service/{VISION}.metadata.namespace",
        "error",
    ),
    ("olares-multiple-install", VISION, lambda f: edit(f / M, *MULTIPLE), M, "options.allowMultipleInstall", "error"),
    ("olares-cluster-names", VISION, fixed_cluster_role, "templates/role.yaml", "ClusterRole/vision-reader", "error"),
    (
        "olares-hostpath-recreate",
        VISION,
        lambda f: edit(f / D, "type: Recreate", "type: RollingUpdate"),
        D,
        f"Deployment/{VISION}.spec.strategy",
        "error",
    ),
    (
        "olares-container-resources",
        VISION,
        lambda f: edit(f / D, '              memory: "24Gi"\n', ""),
        D,
        f"{POD}.resources",
        "error",
    ),
    (
        "olares-resource-sums",
        VISION,
        lambda f: edit(f / D, 'memory: "24Gi"', 'memory: "30Gi"'),
        M,
        "spec.accelerator[0].requiredMemory",
        "error",
    ),
    (
        "olares-privileged",
        VISION,
        lambda f: edit(f / D, "allowPrivilegeEscalation: false", "privileged: true"),
        D,
        f"{POD}.securityContext",
        "error",
    ),
    (
        "olares-service-account",
        VISION,
        lambda f: add(f / "templates/rbac.yaml", SERVICE_ACCOUNT),
        "templates/rbac.yaml",
        "ClusterRole/",
        "error",
    ),
    (
        "gpumem-bare-mib",
        VISION,
        lambda f: edit(f / D, "nvidia.com/gpumem: 24000", 'nvidia.com/gpumem: "23Gi"'),
        D,
        f"{POD}.resources.requests.nvidia.com/gpumem",
        "error",
    ),
    (
        "gpu-memory-request",
        VISION,
        lambda f: edit(f / D, "nvidia.com/gpumem: 24000", "nvidia.com/gpumem: 20000"),
        D,
        f"{POD}.resources.requests.nvidia.com/gpumem",
        "error",
    ),
    (
        "secret-outside-secret",
        VISION,
        lambda f: edit(
            f / D,
            "            - name: HF_TOKEN_PATH\n",
            "            - name: TOKEN_COPY\n              value: {{ get "
            '.Values.olaresEnv "HF_TOKEN" | quote }}\n'
            "            - name: HF_TOKEN_PATH\n",
        ),
        D,
        f"Deployment/{VISION}",
        "warning",
    ),
    ("helm-lint", VISION, lambda f: edit(f / "Chart.yaml", "apiVersion: v2", "apiVersion: v9"), "", "", "warning"),
    (
        "helm-template",
        AUDIO,
        lambda f: edit(f / "templates/service.yaml", "  ports:", '  ports: {{ fail "no" }}'),
        "",
        "",
        "error",
    ),
    (
        "kube-schema",
        AUDIO,
        lambda f: edit(f / "templates/service.yaml", "port: 8080", "port: eighty"),
        "templates/service.yaml",
        f"Service/{AUDIO}.spec.ports.0.port",
        "error",
    ),
]


@pytest.mark.parametrize(
    ("rule", "app", "change", "file", "path", "severity"),
    CASES,
    ids=[f"{c[0]}-{c[4].rsplit('.', 1)[-1] or 'file'}" for c in CASES],
)
def test_rule_fails_on_a_broken_chart(
    tmp_path: Path,
    helms: list[HelmBinary],
    rule: str,
    app: str,
    change: Callable[[Path], None],
    file: str,
    path: str,
    severity: str,
) -> None:
    folder = broken(tmp_path, app, change)
    report = lint([str(folder)], helms)
    hits = [p for p in report.problems if p.rule == rule and p.severity == severity]
    assert hits, [str(p) for p in report.problems]
    where = str(folder) + (f"/{file}" if file else "")
    assert any(p.file == where and p.path.startswith(path) for p in hits), [str(p) for p in hits]


def test_generated_charts_lint_clean(helms: list[HelmBinary]) -> None:
    report = lint([str(CHARTS)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    assert len(report.checked) == 3


def test_official_reference_charts_lint_clean(helms: list[HelmBinary]) -> None:
    report = lint([str(shared("reference/official-v3"))], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    assert len(report.checked) == 2


def test_seed_author_charts_show_their_real_problems(helms: list[HelmBinary]) -> None:
    report = lint([str(shared("reference/seed-market"))], helms)

    def found(problems: list[Problem]) -> set[tuple[str, str]]:
        return {(p.file.split("seed-market/", 1)[1].split("/", 1)[0], p.rule) for p in problems}

    errors, warnings = found(report.errors), found([p for p in report.problems if p.severity == "warning"])
    # apiVersion v2 without subCharts, and '>=1.12.3-0', which reaches boxes that refuse v2 (on every manifest
    # version since Olares checks the olares dependency of all): Olares' own check refuses all three
    assert errors == {
        (app, rule)
        for app in (AUDIO, "vllmgemma426ba4bvisionone", "vllmgemma4dflashone")
        for rule in ("olares-subcharts", "olares-dependency")
    }
    for app in ("vllmgemma426ba4bvisionone", "vllmgemma4dflashone"):
        # advice where Olares does not look at a v2 app's resources: 24Gi requested, 4Gi declared
        assert (app, "olares-resource-sums") in warnings
        assert (app, "secret-outside-secret") in warnings  # HF_TOKEN as a plain value


def test_packaged_charts_are_linted_too(tmp_path: Path, helms: list[HelmBinary]) -> None:
    archive = tmp_path / f"{AUDIO}-1.0.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(CHARTS / AUDIO, arcname=AUDIO)
    assert lint([str(archive)], helms).errors == []
    broken_folder = broken(
        tmp_path / "b", AUDIO, lambda f: edit(f / "templates/service.yaml", "port: 8080", "port: eighty")
    )
    with tarfile.open(tmp_path / "broken.tgz", "w:gz") as tar:
        tar.add(broken_folder, arcname=AUDIO)
    assert {p.rule for p in lint([str(tmp_path / "broken.tgz")], helms).errors} == {"kube-schema"}
