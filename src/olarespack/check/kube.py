"""Rendered manifests against the Kubernetes 1.34 schemas (the client line Olares' app-service uses),
reporting every error of a document, not only the first. The schemas are kubernetes-validate's.

Most documents are valid, so each kind's schema is compiled once into Python by fastjsonschema (about 10x
faster per document than interpreting it); only a document that fails goes through jsonschema, which
lists all of its errors."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

import fastjsonschema
import jsonschema
from referencing import Registry, Resource

KUBERNETES_VERSION = "1.34.0"
_SCHEMAS = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
# The schemas' formats are numeric widths and encodings that jsonschema does not check either.
_FORMATS: dict[str, Callable[[Any], bool]] = {
    name: (lambda _: True) for name in ("byte", "date-time", "double", "int32", "int64")
}
_compile_lock = threading.Lock()


def _load(name: str) -> Any:
    return json.loads(resources.files("kubernetes_validate").joinpath(f"{_SCHEMAS}/{name}").read_text("utf-8"))


def _schema_name(kind: str, api_version: str) -> str:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group}.json"


@cache
def _definitions() -> dict[str, Any]:
    definitions: dict[str, Any] = _load("_definitions.json")["$defs"]
    return definitions


@cache
def _schema(kind: str, api_version: str) -> Any | None:
    try:
        return _load(_schema_name(kind, api_version))
    except FileNotFoundError:
        return None  # a custom resource: no schema to check against


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value.rsplit("/", 1)[-1])
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _refs(item, found)


def _local_refs(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: f"#/$defs/{v.rsplit('/', 1)[-1]}" if k == "$ref" and isinstance(v, str) else _local_refs(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_local_refs(item) for item in node]
    return node


@cache
def _compiled(kind: str, api_version: str) -> Callable[[Any], Any] | None:
    schema = _schema(kind, api_version)
    if schema is None:
        return None
    needed: set[str] = set()
    _refs(schema, needed)
    pending = list(needed)
    while pending:  # only the definitions this kind reaches: compiling all of them takes seconds
        more: set[str] = set()
        _refs(_definitions()[pending.pop()], more)
        pending += sorted(more - needed)
        needed |= more
    standalone = _local_refs(schema)
    standalone["$defs"] = {name: _local_refs(_definitions()[name]) for name in sorted(needed)}
    validate: Callable[[Any], Any] = fastjsonschema.compile(standalone, formats=_FORMATS)
    return validate


def _fast_validator(kind: str, api_version: str) -> Callable[[Any], Any] | None:
    with _compile_lock:  # the lint's threads would otherwise compile the same kind twice
        return _compiled(kind, api_version)


@cache
def _full_validator(kind: str, api_version: str) -> jsonschema.protocols.Validator | None:
    schema = _schema(kind, api_version)
    if schema is None:
        return None
    registry: Registry[Any] = Resource.from_contents(_load("_definitions.json")) @ Registry()
    registry = Resource.from_contents(schema) @ registry
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(schema, registry=registry)
    return validator


class SchemaError(NamedTuple):
    path: str  # the field, dotted; "(document)" for the whole object
    message: str
    unknown: bool  # only a field the schema does not know: the API server drops it with a warning


def schema_findings(document: dict[str, Any]) -> list[SchemaError]:
    """Every schema violation of one manifest; unknown kinds (CRDs) pass. A field the schema does not know is
    marked: by default the API server drops it and answers a warning (field validation Warn, KEP-2885), so it
    is not a refusal (bytebase's StatefulSet with a `strategy` merged in beclab/apps #3328)."""
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return [SchemaError("(document)", "kind and apiVersion are required", False)]
    fast = _fast_validator(kind, api_version)
    if fast is None:
        return []
    try:
        fast(document)
        return []
    except fastjsonschema.JsonSchemaValueException as first:
        validator = _full_validator(kind, api_version)
        errors = (
            sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path))) if validator else []
        )
        if not errors:
            return [SchemaError("(document)", first.message, False)]
        return [
            SchemaError(
                ".".join(map(str, e.absolute_path)) or "(document)", e.message, e.validator == "additionalProperties"
            )
            for e in errors
        ]


def schema_errors(document: dict[str, Any]) -> list[str]:
    """The violations the API server refuses, as 'field.path: message' (unknown fields left out)."""
    return [f"{e.path}: {e.message}" for e in schema_findings(document) if not e.unknown]
