"""llama.cpp's llama-server: everything olarespack knows of it (spec model, flag table, GGUF downloader,
rules, KV arithmetic and fit, import, boot log and calibration), behind the engine protocol
(engines/protocol.py)."""

from olarespack.engines.llamacpp.engine import LlamaCpp
from olarespack.engines.llamacpp.spec import LlamaCppCalibration, LlamaCppEngine

ENGINE = LlamaCpp()

__all__ = ["ENGINE", "LlamaCpp", "LlamaCppCalibration", "LlamaCppEngine"]
