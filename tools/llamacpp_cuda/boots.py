"""Boot a CUDA llama-server once per row of PLAN, four at a time on one GPU, and keep what each allocated.

Each boot: the chart's arguments (`-ngl 99 --jinja --no-context-shift -v`) plus the row's, until it listens;
then one completion of a 500-token prompt (the batched products that make cuBLAS take its workspace) and, for
a row with a projector, an image as large as the encoder takes (1120 tokens) and 30 s of audio, the most the
audio app allows; nvidia-smi's per-process figure after each; then SIGINT (llama.cpp prints its memory
breakdown as it exits). Several servers run side by side: each process's memory is read from nvidia-smi by its
pid (the breakdown's `unaccounted` counts the other servers too, so it is not used). One JSON line per boot
in OUT/readings.jsonl, the logs in OUT/logs/. After the boots, `llama-fit-params --fit-print on` with each
row's arguments prints llama.cpp's own estimate (model, context, compute per device) into OUT/fitparams.txt.

Usage (on the GPU machine, from the repository root):
  python3 tools/llamacpp_cuda/boots.py SERVER_DIR OUT E4B.gguf LLAMA8B.gguf MMPROJ.gguf [SKIP,NAMES]
"""

from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import math
import os
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import wave
from pathlib import Path

CHART = ["-ngl", "99", "--threads", "4", "--jinja", "--no-context-shift", "-v"]
UB = ["-b", "512", "-ub", "512", "-fa", "on"]
CACHES = {
    "f16": [],
    "q8_0": ["-ctk", "q8_0", "-ctv", "q8_0"],
    "q4_0": ["-ctk", "q4_0", "-ctv", "q4_0"],
    "q8_0k": ["-ctk", "q8_0"],
    "q4_0k": ["-ctk", "q4_0"],
}


def plan() -> list[tuple[str, str, list[str], bool]]:
    """(name, model key, arguments, with media requests): the audio app's boot first, then the caches."""
    rows: list[tuple[str, str, list[str], bool]] = [
        ("e4b-c32k-np1-f16-mmproj", "e4b", ["-c", "32768", "-np", "1", *UB, "--mmproj", "MMPROJ"], True),
        ("e4b-c128k-np1-f16-mmproj", "e4b", ["-c", "131072", "-np", "1", *UB, "--mmproj", "MMPROJ"], True),
    ]
    for model in ("e4b", "llama8b"):
        for cache, flags in CACHES.items():
            for ctx in (32768, 131072):
                for np_ in (1, 4):
                    rows.append(
                        (
                            f"{model}-c{ctx // 1024}k-np{np_}-{cache}",
                            model,
                            ["-c", str(ctx), "-np", str(np_), *UB, *flags],
                            False,
                        )
                    )
    return rows


# Configurations fit was not fitted to (issue 37): mixed K and V cache types, a quantized cache over other slot
# counts, micro-batches of 2048 and 4096 tokens; both models, text only
UB_LARGE = {2048: ["-b", "2048", "-ub", "2048", "-fa", "on"], 4096: ["-b", "4096", "-ub", "4096", "-fa", "on"]}
HELD_OUT: list[tuple[str, list[str], int, int]] = [
    ("q8_0k-q4_0v", ["-ctk", "q8_0", "-ctv", "q4_0", *UB], 32768, 4),
    ("q8_0k-q4_0v", ["-ctk", "q8_0", "-ctv", "q4_0", *UB], 131072, 1),
    ("q4_0k-q8_0v", ["-ctk", "q4_0", "-ctv", "q8_0", *UB], 32768, 1),
    ("q8_0", ["-ctk", "q8_0", "-ctv", "q8_0", *UB], 65536, 2),
    ("q4_0", ["-ctk", "q4_0", "-ctv", "q4_0", *UB], 16384, 8),
    ("f16-ub2048", UB_LARGE[2048], 32768, 1),
    ("q8_0-ub2048", ["-ctk", "q8_0", "-ctv", "q8_0", *UB_LARGE[2048]], 131072, 4),
    ("f16-ub4096", UB_LARGE[4096], 65536, 1),
]


# A separate drafter (issue 37): the target itself as its own drafter (-md, every layer on the GPU), so the two
# share a vocabulary; its KV cache and compute buffer come on top of the target's. b11434 frees a drafter no
# --spec-type uses ("no implementations specified for speculative decoding")
DRAFTED: list[tuple[int, int]] = [(32768, 1), (131072, 1), (32768, 4)]


def plan_drafter() -> list[tuple[str, str, list[str], bool]]:
    return [
        (f"{model}-c{ctx // 1024}k-np{np_}-drafter", model, ["-c", str(ctx), "-np", str(np_), *UB, "-md", "SELF",
                                                             "-ngld", "99", "--spec-type", "draft-simple"], False)
        for model in ("e4b", "llama8b")
        for ctx, np_ in DRAFTED
    ]  # fmt: skip


def plan_held_out() -> list[tuple[str, str, list[str], bool]]:
    return [
        (f"{model}-c{ctx // 1024}k-np{np_}-{name}", model, ["-c", str(ctx), "-np", str(np_), *flags], False)
        for model in ("e4b", "llama8b")
        for name, flags, ctx, np_ in HELD_OUT
    ]


def smi() -> dict[int, int]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:
        return {}
    found: dict[int, int] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            found[int(parts[0])] = int(parts[1])
    return found


def post(port: int, path: str, body: dict[str, object], timeout: float = 300) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Connection": "close"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return str(response.status)


def ready(port: int) -> bool:
    """/health answers 200 once the model is loaded (the -v log scrolls too fast to be searched)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def png(side: int) -> bytes:
    from PIL import Image  # the GPU machine's image has pillow

    image = Image.new("RGB", (side, side))
    image.putdata([((x * 7) % 256, (y * 5) % 256, ((x + y) * 3) % 256) for y in range(side) for x in range(side)])
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def wav(seconds: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 7.0))) for i in range(16000 * seconds)))
    return buf.getvalue()


MEDIA: dict[str, str] = {}
PORTS = iter(range(18100, 18400))
LOCK = threading.Lock()


def media_requests(port: int) -> list[tuple[str, dict[str, object]]]:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + MEDIA["png"]}}
    audio = {"type": "input_audio", "input_audio": {"data": MEDIA["wav"], "format": "wav"}}
    return [
        (
            kind,
            {
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Describe it."}, part]}],
                "max_tokens": 4,
            },
        )
        for kind, part in (("image", image), ("audio", audio))
    ]


def boot(server: Path, out: Path, models: dict[str, Path], row: tuple[str, str, list[str], bool]) -> dict:
    name, model, args, media = row
    with LOCK:
        port = next(PORTS)
    args = [str(models["mmproj"]) if a == "MMPROJ" else str(models[model]) if a == "SELF" else a for a in args]
    log = out / "logs" / f"{name}.log"
    argv = [
        str(server / "llama-server"),
        "-m",
        str(models[model]),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *CHART,
        *args,
    ]
    reading: dict[str, object] = {"name": name, "model": model, "args": args, "readings": {}}
    started = time.monotonic()
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    try:
        while time.monotonic() - started < 240 and proc.poll() is None and not ready(port):
            time.sleep(0.25)
        readings: dict[str, int | str] = {"boot": smi().get(proc.pid, -1)}
        asks: list[tuple[str, str, dict[str, object]]] = [
            ("text", "/completion", {"prompt": "a " * 500, "n_predict": 8, "seed": 1})
        ]
        if media:
            asks += [(kind, "/v1/chat/completions", body) for kind, body in media_requests(port)]
        for kind, path, body in asks:
            try:
                post(port, path, body)
                readings[kind] = smi().get(proc.pid, -1)
            except Exception as exc:  # one refused request is recorded, the boot goes on
                readings[kind] = -1
                readings[f"{kind}_error"] = str(exc)[:300]
        reading["readings"] = readings
    finally:
        proc.send_signal(2)
        try:
            reading["exit"] = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            reading["exit"] = "killed"
    reading["seconds"] = round(time.monotonic() - started, 1)
    with LOCK, (out / "readings.jsonl").open("a", encoding="utf-8") as sink:
        sink.write(json.dumps(reading) + "\n")
    print(json.dumps(reading), flush=True)
    return reading


def fit_params(server: Path, out: Path, models: dict[str, Path], row: tuple[str, str, list[str], bool]) -> str:
    name, model, args, _ = row
    args = [str(models[model]) if a == "SELF" else a for a in args if a not in ("--mmproj", "MMPROJ")]
    argv = [str(server / "llama-fit-params"), "-m", str(models[model]), "-ngl", "99", *args, "--fit-print", "on"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return f"== {name} (exit {done.returncode})\n{done.stdout.strip()}\n"


def main() -> None:
    server, out = Path(sys.argv[1]), Path(sys.argv[2])
    models = {"e4b": Path(sys.argv[3]), "llama8b": Path(sys.argv[4]), "mmproj": Path(sys.argv[5])}
    (out / "logs").mkdir(parents=True, exist_ok=True)
    MEDIA["png"] = base64.b64encode(png(1600)).decode()
    MEDIA["wav"] = base64.b64encode(wav(30)).decode()
    done = set(sys.argv[6].split(",")) if len(sys.argv) > 6 else set()  # rows a first call already booted
    plans = {"held-out": plan_held_out, "drafter": plan_drafter}
    chosen = plans.get(os.environ.get("PLAN", ""), plan)()
    rows = [row for row in chosen if row[0] not in done]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda row: boot(server, out, models, row), rows))
    if (server / "llama-fit-params").is_file():
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            texts = list(pool.map(lambda row: fit_params(server, out, models, row), rows))
        (out / "fitparams.txt").write_text("".join(texts), encoding="utf-8")


if __name__ == "__main__":
    main()
