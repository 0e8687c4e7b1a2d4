"""One rule of the catalog (core/rule_catalog.py): its layer, what it protects against, where it comes from."""

from __future__ import annotations

from typing import NamedTuple


class Rule(NamedTuple):
    layer: str
    text: str
    source: str


OWN = "olarespack"  # the source of a rule olarespack adds (a failure it prevents), not one Olares' linter has
