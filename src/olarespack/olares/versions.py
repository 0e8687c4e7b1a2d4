"""What kind of manifest a chart carries, as Olares' linter decides it: the manifest version (legacy below
0.12.0, modern from it), the apiVersion, the accelerator modes it is rendered for, and whether an Olares
release satisfies a dependency range (Masterminds' constraint syntax, which oac uses)."""

from __future__ import annotations

import re
from typing import Any

import semver

MODERN = semver.Version(0, 12, 0)


def parse_version(text: object) -> semver.Version | None:
    """Like Masterminds' NewVersion, which oac uses: a leading v and missing parts are accepted."""
    raw = str(text or "").strip().removeprefix("v")
    try:
        return semver.Version.parse(raw, optional_minor_and_patch=True)
    except (ValueError, TypeError):
        return None


def is_modern(manifest: dict[str, Any]) -> bool:
    """oac resourcesCheckApplies: olaresManifest.version parses and is >= 0.12.0 (a prerelease is not)."""
    version = parse_version(manifest.get("olaresManifest.version"))
    return version is not None and version >= MODERN


def is_legacy(manifest: dict[str, Any]) -> bool:
    """oac isLegacyVersion: parses and is below 0.12.0 (an unparseable version counts as modern)."""
    version = parse_version(manifest.get("olaresManifest.version"))
    return version is not None and version < MODERN


def render_modes(manifest: dict[str, Any]) -> list[str]:
    """The accelerator modes oac renders a chart for (.Values.GPU.Type): each mode of spec.accelerator[];
    one render without a GPU type when there is none."""
    spec = manifest.get("spec")
    accelerator = spec.get("accelerator") if isinstance(spec, dict) else None
    modes = (
        [str(entry.get("mode") or "").strip() for entry in accelerator or [] if isinstance(entry, dict)]
        if isinstance(accelerator, list)
        else []
    )
    return [mode for mode in dict.fromkeys(modes) if mode] or [""]


def api_version(manifest: dict[str, Any]) -> str:
    return str(manifest.get("apiVersion") or "").strip()


_CONSTRAINT = re.compile(r"^\s*(>=|<=|!=|=|>|<|~|\^)?\s*v?([0-9][0-9A-Za-z.+-]*)\s*$")


def satisfies(version: str, constraint: str) -> bool | None:
    """Masterminds-style: ',' (or space) is AND, '||' is OR; None when the constraint cannot be read."""
    target = semver.Version.parse(version)
    for alternative in constraint.split("||"):
        parts = [p for p in re.split(r"[,\s]+(?=[<>=!~^0-9v])", alternative.strip()) if p.strip()]
        if not parts:
            return None
        ok = True
        for part in parts:
            match = _CONSTRAINT.match(part)
            bound = parse_version(match.group(2)) if match else None
            if match is None or bound is None:
                return None
            op = match.group(1) or "="
            # Masterminds ignores prereleases of the bound for release targets: compare the release parts
            low = bound.replace(prerelease=None, build=None) if bound.prerelease == "0" else bound
            result = {
                ">=": target >= low,
                "<=": target <= low,
                ">": target > low,
                "<": target < low,
                "=": target == low,
                "!=": target != low,
                "~": low <= target < low.bump_minor(),
                "^": low <= target < low.bump_major(),
            }[op]
            ok = ok and result
        if ok:
            return True
    return False


def lowest_admitted(manifests: list[dict[str, Any]], releases: list[str]) -> str | None:
    """The oldest of `releases` (oldest first) that some manifest's `olares` system dependency admits: where
    the market can install the app first. None when no manifest names a range that admits one."""
    constraints = []
    for manifest in manifests:
        options = manifest.get("options")
        for entry in (options.get("dependencies") or []) if isinstance(options, dict) else []:
            if isinstance(entry, dict) and entry.get("name") == "olares" and entry.get("type") == "system":
                constraints.append(str(entry.get("version") or ""))
    return next((release for release in releases if any(satisfies(release, c) for c in constraints)), None)
