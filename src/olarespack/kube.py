"""Rendered manifests against the Kubernetes 1.34 schemas (the client line Olares' app-service uses),
reporting every error of a document, not only the first. The schemas are kubernetes-validate's."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from referencing import Registry, Resource

KUBERNETES_VERSION = "1.34.0"
_SCHEMAS = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"


def _load(name: str) -> Any:
    return json.loads(resources.files("kubernetes_validate").joinpath(f"{_SCHEMAS}/{name}").read_text("utf-8"))


@cache
def _registry() -> Registry[Any]:
    return Resource.from_contents(_load("_definitions.json")) @ Registry()


@cache
def _validator(kind: str, api_version: str) -> jsonschema.protocols.Validator | None:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = _load(f"{kind.lower()}-{group}.json")
    except FileNotFoundError:
        return None
    registry = Resource.from_contents(schema) @ _registry()
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(schema, registry=registry)
    return validator


def schema_errors(document: dict[str, Any]) -> list[str]:
    """Every schema violation of one manifest, as 'field.path: message'; unknown kinds (CRDs) pass."""
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return ["kind and apiVersion are required"]
    validator = _validator(kind, api_version)
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}" for e in errors]
