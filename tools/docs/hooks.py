"""mkdocs hooks: the command reference page is generated from the CLI at build time (reference.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from mkdocs.structure.files import File, Files
from reference import commands_markdown


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/commands.md", content=commands_markdown()))
    return files
