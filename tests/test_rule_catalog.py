"""Every rule olarespack can report is catalogued, and every catalogued rule has a test that makes it fire
(the bad-spec corpus, the broken-chart cases, or a named test below)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import olarespack.engines
from olarespack.cli import main
from olarespack.core import rule_catalog
from olarespack.core.errors import Problem
from olarespack.core.rule_catalog import Rule, catalog
from olarespack.olares.manifest import RESERVED_APP_IDS
from test_bad_specs import CASES, expected
from test_rules_olares import CASES as CHART_CASES

SOURCE = Path(__file__).resolve().parents[1] / "src" / "olarespack"
RULES = catalog()  # the shared rules and every engine's own (registered by importing olarespack.engines)
# rules shown firing by tests outside the two corpora
FIRED_ELSEWHERE = {
    "llamacpp-mtp-layers": "test_rules_engine.py (draft-mtp on a model whose data names no MTP layers)",
    "vllm-engine-config": "test_vllm_judge.py (vLLM 0.21.0's own config code refuses command lines lint passes)",
    "vllm-engine-config-unjudged": "test_vllm_judge.py (no judge here; an option left out of the judged line)",
    "file": "test_spec.py (unreadable spec)",
    "env-loads-code": "test_smoke_confine.py (lint warns on LD_PRELOAD and PYTHONWARNINGS)",
    "spec-mtp-alias": "test_rules_engine.py",
    "published-version": "test_package.py",
    "icon-file": "test_package.py",
    "version-gate": "test_release.py",
    "bump": "test_release.py",
    "context-fit": "bad-specs (context-too-long)",
    "orphan-chart": "test_project_checks.py",
    "vllm-extensible-kv-cache": "test_vllm_034.py",
    "kv-bytes-over-booking": "test_vllm_034.py",
    "ubatch-batch": "test_rules_engine.py (a warning)",
    "pinned-model-shape": "test_pinned_model.py",
    "pinned-model-args": "test_pinned_model.py",
    "chart-input": "test_lint_inputs.py",
    "changelog-date": "test_changelog_dates.py",
    "olares-overlay-gateway": "test_oac_cases.py (wlrbad)",
    "llm-gateway-route": "test_llm_gateway.py",
    "olares-ports": "test_olares_now.py (ServicePort cases)",
    "olares-appid": "test_olares_now.py",
    "clone-env": "test_market_check.py (clone-check)",
    "olares-subpathexpr": "test_olares_now.py",
    "model-data": "test_model_add.py (hostile models/ files)",
    "llamacpp-cache-type": "test_engine_images.py",
    "llamacpp-spec-type": "test_engine_images.py",
    "llamacpp-image-family": "test_engine_images.py",
    "llamacpp-release-tag": "test_llamacpp_sources.py",
    "chat-template-path": "test_engine_images.py",
    "parser-unknown": "test_consistency.py",
    "calibration-log": "test_calibrate.py",
    "engine-release-option": "test_release_rules.py",
    "engine-release-value": "test_release_rules.py",
    "engine-release-deprecated": "test_release_rules.py",
    "engine-release-env": "test_release_rules.py",
    "engine-release-conflict": "test_release_rules.py",
    "engine-release-table": "test_release_rules.py",
    "host-memory": "test_fit.py",
    "gpu-booking-unused": "test_fit_cli.py",
    "plan": "test_plan_write.py",
    "bench-stale": "test_bench_record.py",
    "bench-impossible": "test_bench_hostile.py",
    "image-cuda": "test_image_cuda.py",
    "olares-gpu-limit": "test_olares_now.py",
    "olares-memory-covers-gpu": "test_olares_now.py",
    "mmproj-width": "test_model_files_fit.py",
    "drafter-vocab": "test_model_files_fit.py",
    "drafter-architecture": "test_model_files_fit.py",
}


def test_every_rule_in_the_source_is_catalogued() -> None:
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in SOURCE.rglob("*.py")
        if p.name not in ("rule_catalog.py", "rules_olares.py", "catalog.py")
    )
    used = set(re.findall(r'rule="([a-z0-9-]+)"', text))
    used |= set(re.findall(r'"((?:olares|gpumem|secret)-[a-z-]+)"[,)]', text))
    used |= {"spec-unknown-key", "spec-missing", "spec-range", "spec-format", "spec-choice", "spec-type"}
    assert used - set(RULES) - RESERVED_APP_IDS == set()  # olares-app is an app id Olares keeps, not a rule


def test_every_catalogued_rule_has_a_failing_test() -> None:
    fired = {rule for case in CASES for _, rule, _ in expected(case)}
    fired |= {case[0] for case in CHART_CASES}
    fired |= set(FIRED_ELSEWHERE)
    assert set(RULES) - fired == set()


def test_lint_lists_the_rules() -> None:
    result = CliRunner().invoke(main, ["lint", "--rules"])
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == len(RULES)
    assert "gemma4-flash-attn" in result.stdout


def _owners(rule_id: str) -> set[str]:
    """Where a rule id is reported: a top-level package of olarespack, or engines/<kind> for an engine's own code."""
    found = set()
    for path in SOURCE.rglob("*.py"):
        if path.name in ("rule_catalog.py", "catalog.py") or f'"{rule_id}"' not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(SOURCE).parts
        is_engine_package = parts[0] == "engines" and len(parts) > 2
        found.add("/".join(parts[:2]) if is_engine_package else parts[0])
    return found


def test_an_engine_package_owns_the_rules_only_it_reports() -> None:
    for engine in olarespack.engines.ENGINES.values():
        package = f"engines/{type(engine).__module__.split('.')[2]}"
        for rule_id in engine.rule_catalog():
            assert _owners(rule_id) == {package}, (rule_id, _owners(rule_id))
    engine_packages = {f"engines/{kind}" for kind in olarespack.engines.ENGINES}
    for rule_id in rule_catalog.RULES:
        owners = _owners(rule_id)
        assert not (len(owners) == 1 and owners <= engine_packages), f"{rule_id} is only reported by {owners}"


def test_an_engine_rule_is_known_to_problems_and_listed_in_its_layer() -> None:
    listed = list(RULES)
    assert "mmproj-width" not in rule_catalog.RULES and "mmproj-width" in RULES
    engine_layer = [rule_id for rule_id in listed if RULES[rule_id].layer == "engine"]
    assert listed.index(engine_layer[0]) + len(engine_layer) - 1 == listed.index(engine_layer[-1])  # one block
    assert Problem("x.yaml", "engine.model", "m", rule="mmproj-width").rule == "mmproj-width"


def test_a_rule_id_is_declared_once() -> None:
    rule = Rule("engine", "text", "source")
    with pytest.raises(ValueError, match="'yaml' of Another is already declared by the shared catalog"):
        rule_catalog.register("Another", {"yaml": rule})
    with pytest.raises(ValueError, match=re.escape("'mmproj-width' of Another is already declared by llama.cpp")):
        rule_catalog.register("Another", {"mmproj-width": rule})
    with pytest.raises(ValueError, match="is not in the rule catalog"):
        Problem("x.yaml", "", "m", rule="no-such-rule")
