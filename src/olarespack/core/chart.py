"""The chart type every stage passes around: a chart folder's files as text, keyed by chart-relative path,
with its OlaresManifest.yaml parsed once when the chart is made (never filled in later by a check).

The same type holds a chart olarespack rendered and a chart read from disk or an archive, so the Olares
rules, helm and the market read one shape."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from olarespack.core.yamltext import load_yaml

MANIFEST = "OlaresManifest.yaml"


def _parse_manifest(files: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
    text = files.get(MANIFEST)
    if text is None:
        return {}, "missing"
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        return {}, f"invalid YAML: {exc}"
    if not isinstance(data, dict):
        return {}, "not a mapping"
    return data, None


@dataclass(frozen=True)
class Chart(Mapping[str, str]):
    """path -> text of a chart folder; `label` says where problems about it are reported."""

    name: str  # folder name (= app name for a rendered chart)
    files: Mapping[str, str]
    label: str = ""
    manifest: dict[str, Any] = field(init=False, compare=False, repr=False)
    manifest_error: str | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        manifest, error = _parse_manifest(self.files)
        object.__setattr__(self, "manifest", manifest)
        object.__setattr__(self, "manifest_error", error)

    def __getitem__(self, path: str) -> str:
        return self.files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def where(self, path: str) -> str:
        return f"{self.label}/{path}" if self.label else path

    def labelled(self, label: str) -> Chart:
        return Chart(self.name, self.files, label)


# A chart olarespack rendered from a spec.
RenderedChart = Chart
