"""A market source read as a stranger's: over HTTP with bounded answers, and its chart archives opened bounded
(`olarespack market check`, market/check.py)."""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from olarespack.core import boundedjson
from olarespack.core.errors import ProblemsError
from olarespack.core.yamlfile import parse_yaml

# (method, path with query, JSON body or None) -> (status, content type, body); OSError when unreachable
Fetch = Callable[[str, str, Any], tuple[int, str, bytes]]


def shown(value: Any, limit: int = 120) -> str:
    """A stranger's value, printable: repr() escapes control characters and terminal escapes."""
    if not isinstance(value, str):  # JSON text with ensure_ascii: nothing in it can reach the terminal raw
        text = json.dumps(value, ensure_ascii=True)
        return text[:limit] + ("..." if len(text) > limit else "")
    return repr(value[:limit]) + ("..." if len(value) > limit else "")


MAX_MANIFEST: Final = 1 << 20


def chart_archive(data: bytes, name: str) -> tuple[str | None, dict[str, Any]]:
    """(why the bytes are not a chart archive whose top folder is the app's, or None; its OlaresManifest.yaml)."""
    manifest_text: bytes | None = None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tops: set[str] = set()
            for member in members(tar):
                tops.add(member.name.split("/", 1)[0])
                if member.name == f"{name}/OlaresManifest.yaml" and member.isfile() and member.size <= MAX_MANIFEST:
                    handle = tar.extractfile(member)
                    manifest_text = handle.read(MAX_MANIFEST) if handle else None
    except (tarfile.TarError, OSError, EOFError) as exc:
        return f"not a gzipped tar archive ({shown(str(exc), 60)})", {}
    if tops != {name}:
        return f"its top folder is {shown(sorted(tops)[:3], 60)}, not {name}", {}
    if manifest_text is None:
        return f"no {name}/OlaresManifest.yaml of at most {MAX_MANIFEST >> 20} MiB", {}
    try:
        manifest = parse_yaml("OlaresManifest.yaml", manifest_text.decode("utf-8"))
    except (ProblemsError, UnicodeDecodeError) as exc:
        return f"its OlaresManifest.yaml cannot be read ({shown(str(exc), 80)})", {}
    return None, manifest if isinstance(manifest, dict) else {}


def members(tar: tarfile.TarFile, limit: int = 10_000) -> Iterator[tarfile.TarInfo]:
    for number, member in enumerate(tar):
        if number >= limit:
            raise tarfile.TarError(f"more than {limit} files")
        yield member


ANSWER_DEADLINES: Final = 6  # an answer's whole time, in timeouts of silence
MAX_ANSWER: Final = 64 * 2**20  # a chart archive or a catalog; a box has limits of its own, this bounds ours


def http_fetch(base_url: str, timeout: float = 20.0, max_bytes: int = MAX_ANSWER) -> Fetch:
    """A Fetch over HTTP(S) to the market at base_url: each answer read to at most max_bytes (past it, an
    OSError), within `timeout` seconds of silence and ANSWER_DEADLINES times that in all (a server dripping a
    byte at a time is cut); redirects are not followed (a box's Go client follows them: a 3xx is reported as what
    it is)."""
    import httpx

    base = base_url.rstrip("/")
    client = httpx.Client(
        timeout=httpx.Timeout(timeout), follow_redirects=False, headers={"user-agent": "olarespack-market-check"}
    )

    def fetch(method: str, path: str, body: Any) -> tuple[int, str, bytes]:
        try:
            deadline = time.monotonic() + ANSWER_DEADLINES * timeout
            with client.stream(method, base + path, json=body) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > max_bytes:
                        raise OSError(f"{method} {path}: an answer over {max_bytes >> 20} MiB")
                    if time.monotonic() > deadline:
                        raise OSError(f"{method} {path}: not answered whole within {ANSWER_DEADLINES * timeout:g} s")
                return response.status_code, response.headers.get("content-type", ""), bytes(data)
        except httpx.HTTPError as exc:
            raise OSError(f"{type(exc).__name__}: {exc}") from None

    return fetch


def offered_apps(answer: Any) -> dict[str, str]:
    """App name -> version from a market's saved answer: the v2 application list (`data.items`), the v1 info
    (`data.apps`) or the v1 details (`apps`). ValueError when it is none of them."""
    if isinstance(answer, dict) and isinstance(answer.get("data"), dict):
        data = answer["data"]
        entries = (
            data.get("items")
            if isinstance(data.get("items"), list)
            else (list(data["apps"].values()) if isinstance(data.get("apps"), dict) else None)
        )
    elif isinstance(answer, dict) and isinstance(answer.get("apps"), dict):
        entries = list(answer["apps"].values())
    else:
        entries = None
    if entries is None:
        raise ValueError(
            "not a market answer: expected the v2 application list (data.items), the v1 info (data.apps) "
            "or the v1 details (apps)"
        )
    return {
        entry["name"]: entry["version"]
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("version"), str)
    }


def source_apps(source: str, fetch: Fetch | None = None) -> dict[str, str]:
    """What another market source offers: `source` is its URL (its v2 application list, else its v1 info, as a
    1.12.6 box sees it) or a file holding one of its answers. OSError or ValueError with why it cannot be read."""
    if not source.startswith(("http://", "https://")):
        path = Path(source)
        if not path.is_file():  # a named pipe would wait for a writer, a device never end
            raise ValueError("not a regular file")
        with path.open("rb") as handle:
            data = handle.read(MAX_ANSWER + 1)
        if len(data) > MAX_ANSWER:
            raise ValueError(f"over {MAX_ANSWER >> 20} MiB")
        return offered_apps(boundedjson.loads(data))
    fetch = fetch or http_fetch(source)
    for target in ("/api/v2/applications", "/api/v1/appstore/info?version=1.12.6"):
        status, _, data = fetch("GET", target, None)
        if status == 200:
            return offered_apps(boundedjson.loads(data))
    raise ValueError(f"neither {source}/api/v2/applications nor its /api/v1/appstore/info answers 200")
