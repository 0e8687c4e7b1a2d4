"""Moved: `olarespack releases refresh --engine llama.cpp [BUILD ...]` writes the llama.cpp release tables
(olarespack.engines.llamacpp.tables.surface). This module keeps `write_json` for cuda_images.py and passes its
command line to the new command."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from olarespack.engines.release_files import write_json

__all__ = ["write_json"]

if __name__ == "__main__":
    from olarespack.cli import main

    main(["releases", "refresh", "--engine", "llama.cpp", *sys.argv[1:]])
