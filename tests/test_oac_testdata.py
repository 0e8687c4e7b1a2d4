"""Olares' own linter (oac, beclab/Olares framework/oac) against its own test charts: each folder of its
testdata/ that a Go test lints, copied into fixtures/oac-testdata/, gets the verdict that test asserts, with
the rule and the words oac's test looks for in its error. oac's tests skip its resource check on all of
them (SkipResourceCheck); the one chart that overruns its declared resources (firefox) is refused here by
those rules alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from olarespack.check.lint import lint
from olarespack.helm import HelmBinary

pytestmark = pytest.mark.helm

TESTDATA = Path(__file__).parent / "fixtures" / "oac-testdata"
SKIPPED_BY_OAC = {"olares-resource-sums", "olares-container-resources"}  # oac.SkipResourceCheck()

# folder: (rule oac's refusal maps to, text its test looks for) or None where its test accepts the chart
VERDICTS: dict[str, tuple[str, str] | None] = {
    "firefox": None,  # oac_test.go TestLint_Firefox
    "wlreplicas": None,  # oac_test.go TestLint_WorkloadReplicas_OK
    "wlrdefault": ("olares-workload-replicas", "spec.replicas"),  # TestLint_WorkloadScaleToZero_DefaultFilter
    "wlrnoreplicas": ("olares-workload-replicas", "unset"),  # TestLint_WorkloadScaleToZero_Absent
    "wlrbad": ("olares-overlay-gateway", "ghost"),  # TestLint_OverlayGatewayWorkloadMissing
    # allow_multiple_install_test.go
    "multiclusterbad": ("olares-cluster-names", "fixed-multicluster-role"),
    "multiclusterok": None,
    "multiclusterbadworkload": ("olares-multiple-install", "allowMultipleInstall"),
    "multiclusterusername": None,
}


@pytest.fixture(scope="module")
def helms() -> list[HelmBinary]:
    return [HelmBinary(name="helm")]


def test_every_copied_folder_has_a_verdict() -> None:
    assert sorted(p.name for p in TESTDATA.iterdir() if p.is_dir()) == sorted(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_lint_agrees_with_oac(name: str, helms: list[HelmBinary]) -> None:
    errors = [p for p in lint([str(TESTDATA / name)], helms).errors if p.rule not in SKIPPED_BY_OAC]
    found = [f"{p.rule}: {p.file}: {p.path}: {p.message}" for p in errors]
    verdict = VERDICTS[name]
    if verdict is None:
        assert found == []
    else:
        rule, words = verdict
        assert found and all(p.rule == rule for p in errors), found
        assert any(words in line for line in found), found


def test_firefox_is_refused_only_for_what_oac_skips(helms: list[HelmBinary]) -> None:
    # its two Deployments request 600m and 640Mi against a declared 0.5 CPU and 512Mi
    rules = {p.rule for p in lint([str(TESTDATA / "firefox")], helms).errors}
    assert rules == {"olares-resource-sums"}
