"""vLLM: everything olarespack knows of it (spec model, flag table, rules, KV arithmetic and fit, import,
boot log and calibration), behind the engine protocol (engines/protocol.py)."""

from olarespack.engines.vllm.engine import Vllm
from olarespack.engines.vllm.spec import HF_HOME, VllmCalibration, VllmEngine

ENGINE = Vllm()

__all__ = ["ENGINE", "HF_HOME", "Vllm", "VllmCalibration", "VllmEngine"]
