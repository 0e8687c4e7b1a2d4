"""How lint renders a chart: the values Olares gives it for an accelerator mode (every entrance a domain, its
envs' defaults, a sentinel for a token so a token that leaks out of its Secret is caught), and helm's output
parsed once per distinct document."""

from __future__ import annotations

import json
from typing import Any

from olarespack.core.chart import Chart
from olarespack.core.yamltext import load_yaml
from olarespack.helm import split_rendered
from olarespack.olares.values import install_values

SECRET_SENTINEL = "hf_olarespack_lint_sentinel_token"


def _olares_env(manifest: dict[str, Any]) -> dict[str, str]:
    """What Olares puts in .Values.olaresEnv: each env's default; token envs get a sentinel so a token that
    leaks out of its Secret is caught."""
    env: dict[str, str] = {}
    for entry in manifest.get("envs") or []:
        name = str(entry.get("envName", ""))
        source = str((entry.get("valueFrom") or {}).get("envName", ""))
        if "TOKEN" in name or "TOKEN" in source:
            env[name] = SECRET_SENTINEL
        elif entry.get("default") is not None:
            env[name] = str(entry["default"])
    return env


def entrance_names(manifest: dict[str, Any]) -> list[str]:
    return [str(e.get("name")) for key in ("entrances", "sharedEntrances") for e in manifest.get(key) or []]


def render_values(chart: Chart, mode: str, user: str = "alice") -> dict[str, Any]:
    """The values a chart is rendered with for `mode`: what Olares injects at install, and its envs."""
    return install_values(chart.name, entrance_names(chart.manifest), _olares_env(chart.manifest), mode, user)


class DocumentCache:
    """helm's output parsed one document at a time, each distinct document once per lint: a chart's renders
    for other modes, release names and replica counts repeat most of their documents. A repeat is rebuilt
    from JSON (C-fast, and a fresh copy for each caller); a document JSON cannot carry exactly is parsed
    every time."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def load(self, chunk: str) -> Any:
        known = self._known.get(chunk)
        if known is not None:
            return json.loads(known)
        document = load_yaml(chunk)
        try:
            text = json.dumps(document)
        except (TypeError, ValueError):  # a timestamp, a binary: YAML types JSON lacks
            return document
        if json.loads(text) == document:  # not when a key is a number: JSON would make it a string
            self._known[chunk] = text
        return document

    def split(self, text: str) -> list[tuple[str, dict[str, Any], str]]:
        return split_rendered(text, self.load)
