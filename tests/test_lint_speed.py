"""What keeps lint's own work small beside the helm processes it starts: each distinct rendered document
parsed once per lint, Olares' values parsed once per app, a values file that is one temporary file."""

from __future__ import annotations

import datetime
import os
from collections import Counter
from typing import Any

import pytest

from conftest import APPS
from olarespack.check import render as render_module
from olarespack.check.lint import lint_apps
from olarespack.check.render import DocumentCache
from olarespack.core.yamltext import load_yaml
from olarespack.helm import HelmBinary, values_file
from olarespack.olares.values import olares_values
from olarespack.project import render_apps

RENDERED = """---
# Source: app/templates/a.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
data:
  when: 2024-01-02
---
# Source: app/templates/b.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  annotations:
    1: one
"""


def test_a_repeated_document_comes_back_equal_and_unshared() -> None:
    cache = DocumentCache()
    first, second = cache.split(RENDERED), cache.split(RENDERED)
    assert (
        [(source, document) for source, document, _ in first]
        == [(source, document) for source, document, _ in second]
        == [
            (
                "templates/a.yaml",
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "a"},
                    "data": {"when": datetime.date(2024, 1, 2)},
                },
            ),
            (
                "templates/b.yaml",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "annotations": {1: "one"}}},
            ),
        ]
    )
    first[1][1]["metadata"]["name"] = "changed"  # a rule that edits its copy does not reach the next render's
    assert cache.split(RENDERED)[1][1]["metadata"]["name"] == "b"


@pytest.mark.helm
def test_a_lint_parses_each_distinct_rendered_document_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: Counter[str] = Counter()

    def counting(text: str) -> Any:
        parsed[text] += 1
        return load_yaml(text)

    monkeypatch.setattr(render_module, "load_yaml", counting)
    monkeypatch.setattr("olarespack.helm.load_yaml", counting)
    apps = render_apps([APPS / "gemma4-dflash.yaml"])
    report = lint_apps(apps, [HelmBinary(name="helm")])
    assert not report.errors
    assert parsed and max(parsed.values()) == 1, [text[:80] for text, n in parsed.items() if n > 1]


def test_olares_values_are_a_fresh_copy_each_time() -> None:
    first = olares_values("app")
    first["bfl"]["username"] = "mallory"
    assert olares_values("app")["bfl"]["username"] == "alice"
    assert olares_values("app", "bob")["bfl"]["username"] == "bob"


def test_a_values_file_is_one_private_file_gone_after_use() -> None:
    with values_file({"a": 1}) as path:
        assert path.is_file() and path.suffix == ".yaml" and load_yaml(path.read_text()) == {"a": 1}
        assert os.stat(path).st_mode & 0o077 == 0  # the values may carry a token: no one else reads them
    assert not path.exists()
