"""YAML as Helm reads it, through libyaml: a lint or a catalog parses thousands of documents."""

from __future__ import annotations

from typing import Any

import yaml


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=yaml.CSafeLoader)
