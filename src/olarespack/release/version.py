"""SemVer 2 bumps and comparisons (pure). Prerelease bumps go forward: 1.2.3 -> 1.2.4-rc.1 -> 1.2.4-rc.2,
never 1.2.3 -> 1.2.3-rc.1, which SemVer orders before 1.2.3."""

from __future__ import annotations

from typing import Literal

import semver

Part = Literal["major", "minor", "patch", "prerelease"]
PRERELEASE_TOKEN = "rc"


def bump(version: str, part: Part) -> str:
    current = semver.Version.parse(version)
    following = current.next_version(part, prerelease_token=PRERELEASE_TOKEN)
    if following <= current:  # next_version never does this; the guarantee is ours to keep
        raise ValueError(f"{part} bump of {version} gave {following}, not a higher version")
    return str(following)


def is_higher(version: str, than: str) -> bool:
    return semver.Version.parse(version) > semver.Version.parse(than)


def is_version(text: object) -> bool:
    return isinstance(text, str) and semver.Version.is_valid(text)
