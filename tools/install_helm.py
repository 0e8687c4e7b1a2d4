"""Install the pinned, real helm binaries into a virtualenv's bin/ folder (see olarespack/helm_install.py).

Usage: python tools/install_helm.py BIN_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from olarespack.core.errors import ToolMissingError
from olarespack.helm_install import install_all

if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    try:
        for line in install_all(Path(sys.argv[1])):
            print(line)
    except ToolMissingError as exc:
        raise SystemExit(str(exc)) from None
