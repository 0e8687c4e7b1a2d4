"""Load benchmark of `olarespack serve` on loopback with a synthetic catalog.

    .venv/bin/python benchmarks/bench_serve.py [--apps 1000] [--requests 5000] [--seconds 20] [--idle N] [--check]

Builds an N-app catalog (copies of a seed app's rendered charts under new names, through the real
market.build_catalog), starts the real server (`serve` command, uvicorn) in a subprocess on 127.0.0.1 with
a free port, then drives the hash, info and 10-id detail endpoints with keep-alive connections. Every
phase is bounded by a request count and a time limit; the server is stopped at the end. --check exits 1
when a target (on 2 cores) is missed: hash >= 1000 req/s, details >= 300 req/s. --idle N first opens N
connections that send half a request head and then nothing (the lock-out attack: more than the
server's connection cap, which evicts them, until its request deadline closes the rest) and holds them
through every phase.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from olarespack.core.chart import Chart
from olarespack.market import catalog as market
from olarespack.olares.generations import GENERATION_NAMES, GenerationName
from olarespack.project import render_apps

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"  # loopback only
TARGETS = {"hash": 1000.0, "details": 300.0}


def synthetic_catalog(count: int, spec_file: Path) -> dict[str, object]:
    """`count` apps per generation, each a renamed copy of one rendered seed app."""
    apps: dict[GenerationName, list[market.MarketApp]] = {}
    for gen in GENERATION_NAMES:
        (seed,) = render_apps([spec_file], [gen])
        apps[gen] = []
        for i in range(count):
            name = f"benchapp{i:05d}"
            chart = Chart(name, {path: text.replace(seed.spec.name, name) for path, text in seed.chart.items()})
            spec = seed.spec.model_copy(update={"name": name})
            digest = hashlib.sha256(f"{gen}/{name}".encode()).hexdigest()
            apps[gen].append(market.MarketApp(seed.file, spec, chart, digest, seed.spec.metadata.icon))
    return market.build_catalog(apps)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(market_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    code = "import sys; from olarespack.cli.market import serve; serve.main(sys.argv[1:])"
    args = [sys.executable, "-c", code, "--market-dir", str(market_dir), "--host", HOST, "--port", str(port)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/health", timeout=1) as answer:
                if answer.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not come up; see {log}")


@dataclass
class Result:
    name: str
    requests: int
    seconds: float
    latencies: list[float]
    errors: int

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> tuple[int, bool]:
    """The answer's status, and whether it closes the connection (`Connection: close`: the server's last
    answer on it, after max_requests; a client reconnects, as RFC 9112 9.6 asks)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length, closing = 0, False
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
        closing |= line.lower().replace(b" ", b"") == b"connection:close"
    await reader.readexactly(length)
    return status, closing


async def drive(
    name: str, port: int, make: Callable[[random.Random], bytes], total: int, seconds: float, connections: int
) -> Result:
    latencies: list[float] = []
    errors = 0
    sent = 0
    deadline = time.perf_counter() + seconds

    async def worker(seed: int) -> None:
        nonlocal errors, sent
        rng = random.Random(seed)
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            while sent < total and time.perf_counter() < deadline:
                sent += 1
                started = time.perf_counter()
                try:
                    status, closing = await _exchange(reader, writer, make(rng))
                except (OSError, asyncio.IncompleteReadError):  # closed on us (e.g. a 503): count it, go on
                    status, closing = 0, True
                if closing:
                    writer.close()
                    reader, writer = await asyncio.open_connection(HOST, port)
                latencies.append(time.perf_counter() - started)
                errors += status != 200
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(connections)))
    return Result(name, len(latencies), time.perf_counter() - started, latencies, errors)


def get(path: str) -> Callable[[random.Random], bytes]:
    request = f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: bench\r\n\r\n".encode()
    return lambda rng: request


def details(ids: list[str]) -> Callable[[random.Random], bytes]:
    def make(rng: random.Random) -> bytes:
        body = json.dumps({"app_ids": rng.sample(ids, 10), "version": rng.choice(["1.12.5", "1.12.6"])}).encode()
        return (
            f"POST /api/v1/applications/info HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    return make


def hold_unfinished_heads(port: int, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        sock = socket.create_connection((HOST, port), timeout=5)
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: {HOST}\r\nX-Never-Ending: ".encode())
        held.append(sock)
    return held


def closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(4096)  # an answer (503, 408) or the end of the connection
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=5000, help="per endpoint (info: a tenth)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time limit per endpoint")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--spec", type=Path, default=ROOT / "apps" / "gemma4-vision.yaml")
    parser.add_argument("--idle", type=int, default=0, help="connections holding an unfinished request head")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="olarespack-bench-") as tmp:
        market_dir = Path(tmp) / "market"
        catalog = synthetic_catalog(args.apps, args.spec)
        (market_dir).mkdir()
        (market_dir / market.CATALOG_FILE).write_bytes(market.catalog_bytes(catalog))
        ids = list(catalog["generations"]["current"]["apps"])  # type: ignore[index]
        port = free_port()
        server = start_server(market_dir, port, Path(tmp) / "serve.log")
        held: list[socket.socket] = []
        try:
            held = hold_unfinished_heads(port, args.idle)
            phases = [
                ("hash", get("/api/v1/appstore/hash?version=1.12.6"), args.requests),
                ("info", get("/api/v1/appstore/info?version=1.12.6"), max(1, args.requests // 10)),
                ("details", details(ids), args.requests),
            ]
            results = [
                asyncio.run(drive(name, port, make, total, args.seconds, args.connections))
                for name, make, total in phases
            ]
            evicted = sum(map(closed_by_server, held))
        finally:
            for sock in held:
                sock.close()
            server.terminate()
            server.wait(timeout=10)
    missed = 0
    print(f"{args.apps} apps, {args.connections} keep-alive connections, server pid {server.pid} on {HOST}:{port}")
    if held:
        print(f"{len(held)} connections held an unfinished request head; the server closed {evicted} of them")
    for r in results:
        target = TARGETS.get(r.name)
        verdict = "" if target is None else (" ok" if r.rate >= target else f" BELOW TARGET {target:.0f}")
        missed += verdict.startswith(" BELOW")
        print(
            f"{r.name:8} {r.requests:6d} req in {r.seconds:6.2f}s  {r.rate:8.1f} req/s  "
            f"p50 {r.percentile(0.50):7.2f} ms  p99 {r.percentile(0.99):7.2f} ms  errors {r.errors}{verdict}"
        )
    return 1 if args.check and (missed or any(r.errors for r in results)) else 0


if __name__ == "__main__":
    sys.exit(main())
