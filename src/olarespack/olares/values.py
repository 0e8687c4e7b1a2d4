"""The values Olares injects when it installs a chart, for rendering charts offline (lint, diff): the
values of an installed app, and what Olares' own linter adds so that any chart renders."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from olarespack.core.yamltext import load_yaml


@cache
def _olares_values_text() -> str:
    return resources.files("olarespack").joinpath("data/olares-values.yaml").read_text(encoding="utf-8")


@cache
def _olares_values_json(app: str, user: str) -> str:
    return json.dumps(load_yaml(_olares_values_text().replace("APP", app).replace("alice", user)))


def olares_values(app: str, user: str = "alice") -> dict[str, Any]:
    """The data file with its APP and user (alice) put in: both are names, never YAML syntax. Parsed once
    per app and user (a lint asks for each chart's values several times); each caller gets its own copy."""
    values: dict[str, Any] = json.loads(_olares_values_json(app, user))
    return values


MIDDLEWARE = {
    "postgres": "databases",
    "redis": None,
    "mongodb": "databases",
    "mariadb": "databases",
    "mysql": "databases",
    "minio": "buckets",
    "rabbitmq": "vhosts",
    "elasticsearch": "indexes",
    "nats": "subjects",
    "zinc": "indexes",
}


def install_values(
    app: str, entrances: list[str], olares_env: dict[str, str], gpu_mode: str = "", user: str = "alice"
) -> dict[str, Any]:
    """What Olares' own linter gives any chart: the injected values, a domain per entrance, the system
    objects (schedule, os, oidc, dep, svcs) and every middleware, so foreign charts render too."""
    values = olares_values(app, user)
    values["domain"] = {name: f"{i:08x}.{user}.olares.com" for i, name in enumerate(sorted({app, *entrances}))}
    values["olaresEnv"] = dict(olares_env)
    values["gpu"] = gpu_mode or values["gpu"]
    values["GPU"] = (
        {**values["GPU"], "Type": gpu_mode} if gpu_mode else {k: v for k, v in values["GPU"].items() if k != "Type"}
    )
    values.update(
        schedule={"nodeName": "node1"},
        os={"appKey": "key", "appSecret": "secret"},
        oidc={"client": {"id": "id", "secret": "secret"}, "issuer": f"https://auth.{user}.olares.com"},
        dep={},
        svcs={},
    )
    for name, collection in MIDDLEWARE.items():
        entry: dict[str, Any] = {"host": f"{name}.svc", "port": 1, "username": "u", "password": "p"}
        if collection:
            entry[collection] = {}
        values[name] = entry
    return values


OAC_OWNER, OAC_ADMIN = "owner", "admin"  # the owner != admin scenario oac renders v1/v3 charts under


def oac_values(entrances: list[str], api_version: str) -> dict[str, Any]:
    """The values `olares-cli chart lint` renders a chart with (oac helmrender.BuildValues, owner "owner" and admin
    "admin", then ApplyDefaultInstallProfile): sparser than an install's (no GPU type, no olaresEnv values, no
    `gpu`, `userspace.appdata` spelled so), so a template that reads more than these fails there."""
    values: dict[str, Any] = {
        "bfl": {"username": OAC_OWNER},
        "user": {"zone": "user-zone"},
        "schedule": {"nodeName": "node"},
        "userspace": {"appdata": "appdata", "data": "userspace/Home"},
        "os": {"appKey": "appKey", "appSecret": "appSecret"},
        "dep": {},
        "postgres": {"databases": {}},
        "redis": {},
        "mongodb": {"databases": {}},
        "zinc": {"indexes": {}},
        "mariadb": {"databases": {}},
        "mysql": {"databases": {}},
        "minio": {"buckets": {}},
        "rabbitmq": {"vhosts": {}},
        "elasticsearch": {"indexes": {}},
        "nats": {"subjects": {}, "refs": {}},
        "svcs": {},
        "cluster": {},
        "GPU": {},
        "oidc": {"client": {}, "issuer": "issuer"},
        "olaresEnv": {},
        "admin": OAC_ADMIN,
        "domain": {name: "random-string" for name in entrances},
    }
    if api_version.strip().lower() == "v2":  # v2 charts gate their workloads on these
        values["clientAndServer"] = True
    return values
