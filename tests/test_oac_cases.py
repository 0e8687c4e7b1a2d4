"""Charts shaped like the test charts of Olares' own linter (beclab/Olares framework/oac testdata and the
inline charts of its tests), written here from their description, each refused or accepted as oac's tests
expect. Where an oac test skips a check (its resource check, for the legacy firefox chart), the chart here
satisfies that check instead, so the case still runs every layer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from olarespack.check.lint import lint
from olarespack.helm import HelmBinary

pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def helms() -> list[HelmBinary]:
    return [HelmBinary(name="helm")]


def manifest(
    name: str,
    *,
    version: str = "0.8.1",
    api: str | None = None,
    options: str = "",
    resources: str = "",
    spec: str = "",
    top: str = "",
) -> str:
    api_line = f"apiVersion: '{api}'\n" if api is not None else ""
    envelope = (
        resources
        or """  requiredCpu: 100m
  limitedCpu: 500m
  requiredMemory: 128Mi
  limitedMemory: 512Mi
  requiredDisk: 50Mi
  limitedDisk: 100Mi
"""
    )
    window = "'>=1.12.6-0'" if api == "v3" else "'>=1.12.3-0,<1.12.6'"
    return f"""olaresManifest.version: '{version}'
olaresManifest.type: app
{api_line}metadata:
  name: {name}
  appid: {name}
  title: {name.capitalize()}
  description: a test chart
  icon: https://example.org/icon.png
  version: '0.1.0'
  categories:
    - Utilities
entrances:
  - name: {name}
    host: {name}
    port: 80
    title: {name.capitalize()}
    icon: https://example.org/icon.png
    authLevel: private
spec:
  versionName: '1.0'
  developer: test
  submitter: test
  locale:
    - en-US
  supportArch:
    - amd64
{envelope}{spec}permission:
  appData: true
options:
  dependencies:
    - name: olares
      version: {window}
      type: system
{options}{top}"""


def deployment(
    name: str = "{{ .Release.Name }}", *, extra_volume: str = "", replicas: str = "1", resources: str = ""
) -> str:
    limits = (
        resources
        or """            requests:
              cpu: 50m
              memory: 64Mi
            limits:
              cpu: 200m
              memory: 256Mi
"""
    )
    volume = (
        extra_volume
        or """        - name: data
          hostPath:
            type: DirectoryOrCreate
            path: "{{ .Values.userspace.appData }}/app"
"""
    )
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: "{name}"
  namespace: "{{{{ .Release.Namespace }}}}"
spec:
  replicas: {replicas}
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: docker.io/library/nginx:1.27
          resources:
{limits}          volumeMounts:
            - name: data
              mountPath: /data
      volumes:
{volume}---
apiVersion: v1
kind: Service
metadata:
  name: "{{{{ .Release.Name }}}}"
  namespace: "{{{{ .Release.Namespace }}}}"
spec:
  selector:
    app: web
  ports:
    - port: 80
"""


def cluster_role(name: str) -> str:
    return f"""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "{name}"
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get"]
"""


def chart(root: Path, name: str, manifest_text: str, templates: dict[str, str], values: str = "") -> Path:
    folder = root / name
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: {name}\ndescription: a test chart\n"
        "type: application\nversion: 0.1.0\nappVersion: '1.0'\n",
        encoding="utf-8",
    )
    (folder / "values.yaml").write_text(values, encoding="utf-8")
    (folder / "OlaresManifest.yaml").write_text(manifest_text, encoding="utf-8")
    for file, text in templates.items():
        (folder / "templates" / file).write_text(text, encoding="utf-8")
    return folder


def errors(folder: Path, helms: list[HelmBinary]) -> list[str]:
    return [f"{p.rule}: {p.path}: {p.message}" for p in lint([str(folder)], helms).errors]


PROVIDER = """apiVersion: sys.bytetrade.io/v1alpha1
kind: ProviderRegistry
metadata:
  name: prowlarr-provider
  namespace: user-system-{{ .Values.bfl.username }}
spec:
  dataType: legacy_prowlarr
  deployment: prowlarr
  description: prowlarr provider
  endpoint: prowlarr-svc.{{ .Release.Namespace }}
  group: api.prowlarr
  kind: provider
  version: v1
status:
  state: active
"""


def test_legacy_chart_like_firefox_is_accepted(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # oac's firefox: manifest 0.8.1 without apiVersion, hostPath with strategy Recreate, no securityContext,
    # an object in the owner's user-system namespace
    folder = chart(
        tmp_path,
        "firefoxlike",
        manifest("firefoxlike"),
        {"deployment.yaml": deployment("firefoxlike"), "provider.yaml": PROVIDER},
    )
    assert errors(folder, helms) == []


MULTI = "  allowMultipleInstall: true\n"


@pytest.mark.parametrize(
    ("name", "options", "role", "workload", "refused"),
    [
        # multiclusterbad: several installs, a ClusterRole with a fixed name
        ("multiclusterbad", MULTI, "fixed-multicluster-role", "{{ .Release.Name }}", "olares-cluster-names"),
        # multiclusterok: the same ClusterRole named after the release
        ("multiclusterok", MULTI, "{{ .Release.Name }}-role", "{{ .Release.Name }}", None),
        # multiclusterbadworkload: several installs, but the workload keeps one fixed name
        (
            "multiclusterbadworkload",
            MULTI,
            "{{ .Release.Name }}-role",
            "multiclusterbadworkload",
            "olares-multiple-install",
        ),
        # multiclusterusername: one install per user, a ClusterRole named after the owner
        ("multiclusterusername", "", "{{ .Values.bfl.username }}-role", "{{ .Release.Name }}", None),
        # apiVersion v1 probes cluster-scoped names even without allowMultipleInstall
        ("singleclusterfixed", "", "fixed-single-role", "{{ .Release.Name }}", "olares-cluster-names"),
    ],
)
def test_multiple_install_probes(
    tmp_path: Path, helms: list[HelmBinary], name: str, options: str, role: str, workload: str, refused: str | None
) -> None:
    folder = chart(
        tmp_path,
        name,
        manifest(name, version="0.11.0", api="v1", options=options),
        {"deployment.yaml": deployment(workload), "role.yaml": cluster_role(role)},
    )
    found = errors(folder, helms)
    if refused is None:
        assert found == []
    else:
        assert found and all(line.startswith(refused) for line in found), found
        if refused == "olares-cluster-names":
            assert role in found[0]


ACCELERATOR = """  accelerator:
    - mode: cpu
      requiredCpu: 100m
      limitedCpu: 200m
      requiredMemory: 128Mi
      limitedMemory: 256Mi
      requiredDisk: 1Gi
      limitedDisk: 2Gi
"""
SMALL = """            requests:
              cpu: 50m
              memory: 64Mi
            limits:
              cpu: 100m
              memory: 128Mi
"""
TOO_BIG = """            requests:
              cpu: 500m
              memory: 64Mi
            limits:
              cpu: 1
              memory: 128Mi
"""
REPLICAS = "workloadReplicas:\n  {name}: 1\n"
REPLICA_VALUES = "workloads:\n  {name}:\n    replicaCount: 1\n"
REPLICA_FIELD = "{{{{ .Values.workloads.{name}.replicaCount }}}}"


def modern(tmp_path: Path, name: str, api: str, containers: str, **kwargs: str) -> Path:
    return chart(
        tmp_path,
        name,
        manifest(name, version="0.12.0", api=api, resources=ACCELERATOR, top=REPLICAS.format(name=name), **kwargs),
        {"deployment.yaml": deployment(name, resources=containers, replicas=REPLICA_FIELD.format(name=name))},
        values=REPLICA_VALUES.format(name=name),
    )


def test_resource_limits_follow_the_inline_accelerator_envelope(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # resourcelimits_v1_inline and its v3 twin: the containers fit the cpu mode's envelope
    assert errors(modern(tmp_path, "inlinev1", "v1", SMALL), helms) == []
    assert errors(modern(tmp_path, "inlinev3", "v3", SMALL), helms) == []
    # resourcelimits_v1_inline_toobig: refused, naming requiredCpu
    found = errors(modern(tmp_path, "toobig", "v1", TOO_BIG), helms)
    assert any(
        line.startswith("olares-resource-sums") and "requiredCpu" in line and "must be <=" in line for line in found
    ), found
    # an unknown apiVersion is refused before any resource is compared
    found = errors(modern(tmp_path, "apiv0", "v0", SMALL), helms)
    assert any(line.startswith("olares-api-version") for line in found), found


def test_apiversion_v2_skips_the_resource_comparison(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # oac skips checkResourceLimits for v2 at any manifest version: the overrun is advice, not an error
    sub = "  subCharts:\n    - name: toobigv2\n      shared: true\n"
    folder = chart(
        tmp_path,
        "toobigv2",
        manifest("toobigv2", version="0.11.0", api="v2", spec=sub),
        {"deployment.yaml": deployment("toobigv2", resources=TOO_BIG.replace("cpu: 1\n", "cpu: 4\n"))},
    )
    report = lint([str(folder)], helms)
    assert not [p for p in report.errors if p.rule.startswith("olares-resource")], [str(p) for p in report.errors]
    assert [p for p in report.problems if p.rule == "olares-resource-sums" and p.severity == "warning"]


V3_ENV = "envs:\n  - envName: {env}\n    default: smtp.example.org\n    required: false\n    type: string\n"


@pytest.mark.parametrize(
    ("env", "template_line", "values", "refused"),
    [
        ("SMTP_HOST", "{{ .Values.olaresEnv.SMTP_HOST }}", "", None),
        ("SMTP_HOST", "{{ .Values.OLARES_USER_SMTP_SERVER }}", "", "olares-user-env"),
        ("SMTP_HOST", "{{ .Values.olaresEnv.SMTP_HOST }}", "OLARES_USER_SMTP_SERVER: x\n", "olares-user-env"),
        ("OLARES_USER_SMTP_SERVER", "{{ .Values.olaresEnv.OLARES_USER_SMTP_SERVER }}", "", "olares-user-env"),
    ],
)
def test_v3_user_envs(
    tmp_path: Path, helms: list[HelmBinary], env: str, template_line: str, values: str, refused: str | None
) -> None:
    # v3_envs_test.go: apps read user variables through envs[].valueFrom, never by the OLARES_USER_ name
    name = "envsv3"
    text = deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name)).replace(
        "      containers:\n        - name: web\n",
        f"      containers:\n        - name: web\n          env:\n            - name: SMTP\n"
        f'              value: "{template_line}"\n',
    )
    folder = chart(
        tmp_path,
        name,
        manifest(
            name,
            version="0.12.0",
            api="v3",
            resources=ACCELERATOR,
            top=REPLICAS.format(name=name) + V3_ENV.format(env=env),
        ),
        {"deployment.yaml": text},
        values=REPLICA_VALUES.format(name=name) + values,
    )
    found = errors(folder, helms)
    if refused is None:
        assert found == []
    else:
        assert found and all(line.startswith(refused) for line in found), found


OVERLAY = (
    "overlayGateway:\n  entrances:\n    - title: Game\n      port: 7777\n      protocol: udp\n"
    "      workload: {workload}\n"
)


@pytest.mark.parametrize(("workload", "refused"), [("wlreplicas", None), ("ghost", "olares-overlay-gateway")])
def test_overlay_gateway_names_a_rendered_workload(
    tmp_path: Path, helms: list[HelmBinary], workload: str, refused: str | None
) -> None:
    # wlreplicas (accepted) and wlrbad (its overlay entrance names the workload "ghost"): 0.12.0, v1, the
    # replica count read from values.yaml as Olares starts and stops apps
    name = "wlreplicas"
    folder = chart(
        tmp_path,
        name,
        manifest(
            name,
            version="0.12.0",
            api="v1",
            resources=ACCELERATOR,
            top=REPLICAS.format(name=name) + OVERLAY.format(workload=workload),
        ),
        {"deployment.yaml": deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name))},
        values=REPLICA_VALUES.format(name=name),
    )
    found = errors(folder, helms)
    if refused is None:
        assert found == []
    else:
        assert found == [
            f"{refused}: overlayGateway.entrances[0].workload: workload 'ghost' does not match any "
            "rendered Deployment/StatefulSet"
        ]


def test_replicas_follow_the_count_olares_sets(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # checkWorkloadScaleToZero renders replicaCount 0 and 1: a count that inverts it fails both
    name = "inverted"
    text = deployment(name, resources=SMALL, replicas=f"{{{{ sub 1 .Values.workloads.{name}.replicaCount }}}}")
    folder = chart(
        tmp_path,
        name,
        manifest(name, version="0.12.0", api="v1", resources=ACCELERATOR, top=REPLICAS.format(name=name)),
        {
            "deployment.yaml": text.replace("kind: Deployment", "kind: StatefulSet").replace(
                "  strategy:\n    type: Recreate\n", "  serviceName: web\n  updateStrategy:\n    type: OnDelete\n"
            )
        },
        values=REPLICA_VALUES.format(name=name),
    )
    found = errors(folder, helms)
    assert len(found) == 2 and all(line.startswith("olares-workload-replicas") for line in found), found
    assert any("rendered as 1 while workloads.inverted.replicaCount was 0" in line for line in found)
    assert any("rendered as 0 while workloads.inverted.replicaCount was 1" in line for line in found)


def test_a_templated_legacy_manifest_is_read_as_olares_renders_it(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # oac renders a manifest below 0.12.0 with Helm's engine, for the admin's install and another user's
    branch = (
        "entrances:\n{{- if eq .Values.admin .Values.bfl.username }}\n  - name: admin\n    host: admin\n"
        "    port: 80\n    title: Admin\n{{- else }}\n  - name: user\n    host: user\n    port: 80\n"
        "    title: {TITLE}\n{{- end }}\nspec:"
    )
    good = re.sub(r"entrances:\n.*?\nspec:", branch.replace("{TITLE}", "User"), manifest("branchy"), flags=re.S)
    templates = {"deployment.yaml": deployment("branchy")}
    assert errors(chart(tmp_path / "a", "branchy", good, templates), helms) == []
    # the other user's install has an entrance title longer than 30 characters: refused like oac does
    bad = good.replace("title: User", "title: " + "U" * 31)
    found = errors(chart(tmp_path / "b", "branchy", bad, templates), helms)
    assert found and all(line.startswith("olares-entrance") for line in found), found
    # a template that does not render is refused, naming helm's complaint
    broken = good.replace("{{- end }}", "")
    found = errors(chart(tmp_path / "c", "branchy", broken, templates), helms)
    assert any(line.startswith("olares-files") and "does not render" in line for line in found), found


def accelerator_entry(mode: str, gpu: str = "") -> str:
    return ACCELERATOR.replace("mode: cpu", f"mode: {mode}") + (
        f"      requiredGPUMemory: {gpu}\n      limitedGPUMemory: {gpu}\n" if gpu else ""
    )


def moded(tmp_path: Path, name: str, mode: str, gpu: str = "", version: str = "0.12.0") -> Path:
    return chart(
        tmp_path,
        name,
        manifest(
            name, version=version, api="v1", resources=accelerator_entry(mode, gpu), top=REPLICAS.format(name=name)
        ),
        {"deployment.yaml": deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name))},
        values=REPLICA_VALUES.format(name=name),
    )


@pytest.mark.parametrize(
    ("mode", "gpu", "refused"),
    [
        # the newest oac's validResourceModes (resources.go at 3a10c81, PR #3390), GPU memory where gpuMemoryModes
        # allows it; the chart declares amd64
        ("cpu", "", None),
        ("nvidia", "8Gi", None),
        ("amd-gpu", "8Gi", None),
        ("intel-gpu", "8Gi", None),
        ("intel", "", None),
        ("amd", "", None),
        # modes that need arm64 (modeArchRequirement)
        ("moore-soc", "", "mode=moore-soc requires spec.supportArch to contain 'arm64'"),
        ("apple-m", "", "mode=apple-m requires spec.supportArch to contain 'arm64'"),
        # dropped by PR #3390: refused as unknown
        ("amd-apu", "", "not a resource mode oac accepts"),
        ("strix-halo", "", "not a resource mode oac accepts"),
        ("mthreads-m1000", "", "not a resource mode oac accepts"),
        # GPU memory on a mode without a pool of its own
        ("cpu", "8Gi", "oac lets only mode=amd-gpu / mode=intel-gpu / mode=nvidia declare GPU memory"),
        ("intel", "8Gi", "oac lets only mode=amd-gpu / mode=intel-gpu / mode=nvidia declare GPU memory"),
    ],
)
def test_accelerator_modes_and_gpu_memory_follow_oac(
    tmp_path: Path, helms: list[HelmBinary], mode: str, gpu: str, refused: str | None
) -> None:
    found = errors(moded(tmp_path, "modes", mode, gpu), helms)
    if refused is None:
        assert found == []
    else:
        assert found and all(line.startswith("olares-accelerator") for line in found), found
        assert all(refused in line for line in found), found


def test_gpu_memory_in_accelerator_below_0_12_is_never_booked(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # below 0.12.0 Olares sizes the app by the flat fields: accelerator[]'s GPU memory is a warning there
    folder = moded(tmp_path, "legacygpu", "nvidia", "8Gi", version="0.11.0")
    hits = [p for p in lint([str(folder)], helms).problems if p.rule == "gpu-memory-generation"]
    assert sorted((p.path, p.severity) for p in hits) == [
        ("spec.accelerator[0].limitedGPUMemory", "warning"),
        ("spec.accelerator[0].requiredGPUMemory", "warning"),
    ]
    # at 0.12.0 the same entry is read: no warning
    folder = moded(tmp_path / "modern", "moderngpu", "nvidia", "8Gi")
    assert not [p for p in lint([str(folder)], helms).problems if p.rule == "gpu-memory-generation"]
