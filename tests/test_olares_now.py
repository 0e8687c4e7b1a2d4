"""Olares as it is now: what the Market's bot merges although the stored oac (or olarespack) refused it, and
the rules current oac has. Hand-written charts shaped like the official ones, linted as `olarespack lint PATH`."""

from __future__ import annotations

from pathlib import Path

import pytest

from olarespack.check.lint import lint
from olarespack.core.errors import Problem
from olarespack.helm import HelmBinary
from test_oac_cases import (
    ACCELERATOR,
    REPLICA_FIELD,
    REPLICA_VALUES,
    REPLICAS,
    SMALL,
    accelerator_entry,
    chart,
    deployment,
    manifest,
)

pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def helms() -> list[HelmBinary]:
    return [HelmBinary(name="helm")]


def app(
    tmp_path: Path,
    name: str,
    resources: str = ACCELERATOR,
    template: str | None = None,
    top: str = "",
    spec: str = "",
    options: str = "",
) -> Path:
    text = template or deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name))
    return chart(
        tmp_path,
        name,
        manifest(
            name,
            version="0.12.0",
            api="v3",
            resources=resources,
            spec=spec,
            top=REPLICAS.format(name=name) + top,
            options=options,
        ),
        {"deployment.yaml": text},
        values=REPLICA_VALUES.format(name=name),
    )


def found(folder: Path, helms: list[HelmBinary], rule: str) -> list[Problem]:
    return [p for p in lint([str(folder)], helms).problems if p.rule == rule]


@pytest.mark.parametrize("mode", ["intel", "amd", "intel-gpu"])
def test_the_modes_oac_added_are_accepted_without_a_word(tmp_path: Path, helms: list[HelmBinary], mode: str) -> None:
    # PR #3390 added them to oac's validResourceModes (resources.go at 3a10c81): embeddinggemmav3's mode intel,
    # which olarespack warned of as not listed yet, is a mode oac takes
    folder = app(tmp_path, "intelish", resources=accelerator_entry(mode, "8Gi" if mode == "intel-gpu" else ""))
    report = lint([str(folder)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    assert not [p for p in report.problems if p.rule == "olares-accelerator"]


@pytest.mark.parametrize(
    ("where", "value", "refused"),
    [
        ("limitedDisk", "-1", "cannot be '-1' for template-only apps; disk quantities must be explicit"),
        ("requiredCpu", "-1", None),
    ],
)
def test_a_template_only_app_may_leave_its_quantities_to_the_install(
    tmp_path: Path, helms: list[HelmBinary], where: str, value: str, refused: str | None
) -> None:
    """resourceQuantityValid (resources.go at 3a10c81): -1 resolves from the rendered chart at install, except
    a template-only app's disk."""
    entry = accelerator_entry("cpu").replace(f"{where}: ", f"{where}: '{value}'  # ", 1)
    # a template app installs many times: its workload is named by the release
    folder = app(
        tmp_path,
        "templ",
        resources=entry,
        options="  templateOnly: true\n  allowMultipleInstall: true\n",
        template=deployment(resources=SMALL, replicas=REPLICA_FIELD.format(name="templ")),
    )
    report = lint([str(folder)], helms)
    hits = [p for p in report.problems if p.rule == "olares-accelerator"]
    assert [p for p in report.errors if p.rule != "olares-accelerator"] == []
    if refused is None:
        assert hits == [], [str(p) for p in hits]
    else:
        assert [p.message for p in hits] == [refused] and hits[0].path.endswith(where)


def test_a_statefulset_with_a_strategy_is_a_warning(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # bytebase (beclab/apps #3328): a StatefulSet takes updateStrategy; the API server drops the unknown
    # `strategy` with a warning by default (field validation Warn, KEP-2885), so the chart installs
    name = "stateful"
    text = (
        deployment(name, resources=SMALL, replicas=REPLICA_FIELD.format(name=name))
        .replace("kind: Deployment", "kind: StatefulSet")
        .replace("  strategy:\n", "  serviceName: web\n  strategy:\n", 1)
    )
    folder = app(
        tmp_path,
        name,
        template=text.replace(
            "hostPath:\n            type: DirectoryOrCreate\n            path:", "emptyDir: {}\n          # path:"
        ),
    )
    report = lint([str(folder)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = found(folder, helms, "kube-schema")
    assert (hit.path, hit.severity) == (f"StatefulSet/{name}.spec", "warning") and "'strategy'" in hit.message
    assert "KEP-2885" in hit.message
    # a value of the wrong type is still refused: the API server answers 400
    broken = app(tmp_path / "b", name, template=text.replace("serviceName: web", "serviceName: [web]"))
    assert [(p.path, p.severity) for p in found(broken, helms, "kube-schema") if p.severity == "error"] == [
        (f"StatefulSet/{name}.spec.serviceName", "error")
    ]


def test_a_hand_written_charts_gpu_memory_limit_above_its_request_is_a_warning(
    tmp_path: Path, helms: list[HelmBinary]
) -> None:
    # embeddinggemmav3 merged with requiredGPUMemory 2048Mi and limitedGPUMemory 4096Mi: oac only wants
    # limited >= required; Olares limits the pod to requiredGPUMemory, so the rest is never given
    entry = accelerator_entry("nvidia").replace(
        "mode: nvidia\n", "mode: nvidia\n      requiredGPUMemory: 2048Mi\n      limitedGPUMemory: 4096Mi\n"
    )
    folder = app(tmp_path, "gpulimit", resources=entry)
    report = lint([str(folder)], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = [p for p in report.problems if p.rule == "olares-gpu-limit"]
    assert (hit.path, hit.severity) == ("spec.accelerator[0].limitedGPUMemory", "warning")


def test_memory_below_the_gpu_memory_is_a_warning_naming_the_olares_change(
    tmp_path: Path, helms: list[HelmBinary]
) -> None:
    entry = accelerator_entry("nvidia", gpu="8Gi")  # requiredMemory 128Mi
    report = lint([str(app(tmp_path, "gpumem", resources=entry))], helms)
    assert report.errors == [], [str(p) for p in report.errors]
    [hit] = [p for p in report.problems if p.rule == "olares-memory-covers-gpu"]
    assert (hit.path, hit.severity) == ("spec.accelerator[0].requiredMemory", "warning")
    assert "128Mi is below requiredGPUMemory (8Gi)" in hit.message and "#3996" in hit.message
    assert "at least 8Gi" in hit.fix
    covered = (
        accelerator_entry("nvidia", gpu="8Gi")
        .replace("requiredMemory: 128Mi", "requiredMemory: 8Gi")
        .replace("limitedMemory: 256Mi", "limitedMemory: 8Gi")
    )
    assert found(app(tmp_path / "covered", "gpumemok", resources=covered), helms, "olares-memory-covers-gpu") == []
    auto = accelerator_entry("nvidia", gpu="8Gi").replace("requiredMemory: 128Mi", 'requiredMemory: "-1"')
    assert found(app(tmp_path / "auto", "gpumemauto", resources=auto), helms, "olares-memory-covers-gpu") == []


def test_the_replicas_rule_says_it_is_oacs_and_since_when(tmp_path: Path, helms: list[HelmBinary]) -> None:
    # grafana and gitlab merged before oac refused a workload whose replicas do not follow replicaCount: still
    # an error (Olares cannot stop the app), which says whose rule it is and since which change
    name = "pinned"
    folder = app(tmp_path, name, template=deployment(name, resources=SMALL).replace("  replicas: 1\n", ""))
    hits = found(folder, helms, "olares-workload-replicas")
    assert hits and all(p.severity == "error" for p in hits)
    assert all("CheckWorkloadReplicasRendered" in p.message and "beclab/Olares #4040" in p.message for p in hits)


def test_a_sub_path_expression_is_refused(tmp_path: Path, helms: list[HelmBinary]) -> None:
    """CheckSubPathExpr (beclab/Olares PR #3943): Olares cannot expand it when it prepares the host folder."""
    text = deployment("subpath", resources=SMALL, replicas=REPLICA_FIELD.format(name="subpath")).replace(
        "              mountPath: /data\n", "              mountPath: /data\n              subPathExpr: $(POD_NAME)\n"
    )
    folder = app(tmp_path, "subpath", template=text)
    [hit] = found(folder, helms, "olares-subpathexpr")
    assert hit.path.endswith("containers[0].volumeMounts[0].subPathExpr") and "'$(POD_NAME)'" in hit.message
    plain = app(tmp_path / "plain", "subpath")
    assert found(plain, helms, "olares-subpathexpr") == []


@pytest.mark.parametrize(
    ("metadata", "locale", "said"),
    [
        ("  categories_v2: [models, models]\n", "en-US", "'models' is listed more than once"),
        ("  tags: ['']\n", "en-US", "must not be empty"),
        ("  tags: [' llm']\n", "en-US", "' llm' must not have surrounding whitespace"),
        ("  categories_v2: [LLM_Chat]\n", "en-US", "'LLM_Chat' must be lowercase alphanumeric words"),
        ("", "english", "'english' must be a valid BCP 47 language tag"),
        ("", "und", "'und' names the undefined language"),
        ("", "en-us", "'en-us' must use canonical spelling 'en-US'"),
    ],
)
def test_the_taxonomy_is_judged_as_oac_does(
    tmp_path: Path, helms: list[HelmBinary], metadata: str, locale: str, said: str
) -> None:
    """ValidateTaxonomy (oac manifest/taxonomy.go): slug lists and BCP 47 locales."""
    folder = app(tmp_path, "taxo")
    manifest = folder / "OlaresManifest.yaml"
    text = manifest.read_text(encoding="utf-8").replace("    - en-US\n", f"    - {locale}\n", 1)
    manifest.write_text(text.replace("  categories:\n", f"{metadata}  categories:\n", 1), encoding="utf-8")
    hits = found(folder, helms, "olares-taxonomy")
    assert len(hits) == 1 and said in hits[0].message, [str(p) for p in hits]


@pytest.mark.parametrize(
    ("port", "said"),
    [
        ("{name: api, host: api, port: 4712}", None),
        ("{name: api, host: api, port: 4712, exposePort: 4712, protocol: udp}", None),
        ("{host: api, port: 4712}", "port.name is required"),
        ("{name: bad_name, host: api, port: 4712}", "port.name must match"),
        ("{name: api, port: 4712}", "port.host is required"),
        ("{name: api, host: API, port: 4712}", "port.host must match"),
        ("{name: api, host: api}", "port.port is required"),
        ("{name: api, host: api, port: 65536}", "port.port must be between 1 and 65535"),
        ("{name: api, host: api, port: 4712, exposePort: -1}", "port.exposePort must be between 1 and 65535"),
        ("{name: api, host: api, port: 4712, protocol: TCP}", 'port.protocol must be one of "", "tcp", "udp"'),
        ("{name: api, host: api, port: 4712}\n  - {name: api, host: peer, port: 4713}", "duplicate port name 'api'"),
    ],
)
def test_top_level_ports_are_judged_as_oac_does(
    tmp_path: Path, helms: list[HelmBinary], port: str, said: str | None
) -> None:
    """oac's ServicePort rules (validate_test.go TestServicePortsValidation, its newest stored version)."""
    folder = app(tmp_path, "ported", top=f"ports:\n  - {port}\n")
    hits = found(folder, helms, "olares-ports")
    if said is None:
        assert hits == []
    else:
        assert len(hits) == 1 and said in hits[0].message, [str(p) for p in hits]


def test_a_template_that_needs_more_than_oacs_values_is_refused(tmp_path: Path, helms: list[HelmBinary]) -> None:
    """`olares-cli chart lint` renders with its own sparse values (oac helmrender.BuildValues: owner 'owner',
    admin 'admin', no GPU type): a template that only an admin's install renders passes an install's values
    (the admin installing) and fails there."""
    text = deployment("gated", resources=SMALL, replicas=REPLICA_FIELD.format(name="gated")).replace(
        "kind: Deployment\n",
        "kind: Deployment\n"
        '{{- if ne .Values.admin .Values.bfl.username }}{{ fail "only the admin installs it" }}{{ end }}\n',
        1,
    )
    hits = found(app(tmp_path, "gated", template=text), helms, "helm-template")
    assert len(hits) == 1 and "the values `olares-cli chart lint` gives" in hits[0].message, [str(h) for h in hits]
    assert "only the admin installs it" in hits[0].message
    assert found(app(tmp_path / "plain", "gated"), helms, "helm-template") == []


def test_a_manifest_without_appid_is_a_warning(tmp_path: Path, helms: list[HelmBinary]) -> None:
    """The seed author's v3 charts drop metadata.appid (his validator wants it gone): oac and a source take them,
    the upload path drops them."""
    folder = app(tmp_path, "noappid")
    manifest = folder / "OlaresManifest.yaml"
    text = manifest.read_text(encoding="utf-8")
    assert "  appid: noappid\n" in text
    manifest.write_text(text.replace("  appid: noappid\n", ""), encoding="utf-8")
    report = lint([str(folder)], helms)
    assert report.errors == []
    [hit] = [p for p in report.problems if p.rule == "olares-appid"]
    assert hit.severity == "warning" and "market upload" in hit.message
