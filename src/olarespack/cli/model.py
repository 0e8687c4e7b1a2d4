"""olarespack model: model facts from the user's own files, kept in the repository's models/ folder."""

from __future__ import annotations

import click


@click.group()
def model() -> None:
    """Model facts (architecture, sizes) that fit and the rules read: models/ first, then the shipped data."""
