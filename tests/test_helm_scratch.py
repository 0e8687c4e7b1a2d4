"""helm's scratch folder (its cache, config and data homes) is a fixed path in the temporary folder that any
local user can name: it is used only when it is this user's alone, else a private one is. Checked on what
the real helm is given (`helm env` prints its homes)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

KINDS = ("cache", "config", "data")
OTHER_UID = 65534  # nobody
pytestmark = pytest.mark.helm  # what the real helm is given


# One olarespack process running helm once: the homes helm says it has, and while the process lives, the
# owner and mode of each home and of the folder holding them (a private folder goes when the process ends).
PROBE = """
import json, os
from pathlib import Path
from olarespack.helm import HelmBinary
out = HelmBinary()._run("env")
assert out.ok, out.stderr
found = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
homes = {kind: found[f"HELM_{kind.upper()}_HOME"].strip('"') for kind in ("cache", "config", "data")}
seen = {path: [os.lstat(path).st_mode, os.lstat(path).st_uid, str(Path(path).resolve())]
        for home in homes.values() for path in (home, str(Path(home).parent))}
print(json.dumps({"homes": homes, "seen": seen}))
"""
Seen = dict[str, tuple[int, int, str]]


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


def fixed(tmp: Path) -> Path:
    return tmp / f"olarespack-helm-{os.getuid()}"


def probe(tmp: Path) -> tuple[dict[str, Path], Seen]:
    """The homes the real helm runs with in a new olarespack process whose temporary folder is `tmp`."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    return {kind: Path(path) for kind, path in found["homes"].items()}, found["seen"]


def helm_homes(tmp: Path) -> dict[str, Path]:
    return probe(tmp)[0]


def planted(tmp: Path) -> Path:
    """A folder holding what another user would like helm to read: a repository list and a plugin."""
    bait = tmp / "bait"
    for kind in KINDS:
        (bait / kind).mkdir(parents=True)
    (bait / "config" / "repositories.yaml").write_text("apiVersion: ''\nrepositories: []\n")
    (bait / "data" / "plugins").mkdir()
    return bait


def assert_private_and_not(tmp: Path, bait: Path) -> None:
    """helm got private homes away from `bait`, and the private folder is gone with the process."""
    homes, seen = probe(tmp)
    for path, (mode, uid, real) in seen.items():
        assert not Path(real).is_relative_to(bait.resolve()), path
        assert stat.S_ISDIR(mode) and uid == os.getuid() and stat.S_IMODE(mode) == 0o700, (path, oct(mode), uid)
    assert len({home.parent for home in homes.values()}) == 1
    assert not next(iter(homes.values())).parent.exists()  # removed at exit: nothing left behind


def test_the_fixed_folder_is_made_private_and_reused(tmp: Path) -> None:
    homes = helm_homes(tmp)
    assert homes == {kind: fixed(tmp) / kind for kind in KINDS}
    assert stat.S_IMODE(os.lstat(fixed(tmp)).st_mode) == 0o700
    assert all(stat.S_IMODE(os.lstat(home).st_mode) == 0o700 for home in homes.values())
    assert helm_homes(tmp) == homes  # the next process finds the folder ours and uses it again


def test_a_link_in_its_place_is_not_followed(tmp: Path) -> None:
    bait = planted(tmp)
    fixed(tmp).symlink_to(bait, target_is_directory=True)
    assert_private_and_not(tmp, bait)  # main gave helm the linked folder
    assert sorted(p.name for p in bait.iterdir()) == list(KINDS) and fixed(tmp).is_symlink()


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user owns needs root")
def test_a_folder_another_user_made_is_not_used(tmp: Path) -> None:
    bait = planted(tmp)
    bait.rename(fixed(tmp))
    for path in (fixed(tmp), *(fixed(tmp) / kind for kind in KINDS)):
        os.chown(path, OTHER_UID, OTHER_UID)
    assert_private_and_not(tmp, fixed(tmp))


def test_a_folder_others_may_write_is_not_used(tmp: Path) -> None:
    fixed(tmp).mkdir(mode=0o700)
    fixed(tmp).chmod(0o777)  # shared: anyone could have put a plugin in it
    assert_private_and_not(tmp, fixed(tmp))


def test_a_file_in_its_place_is_left_alone(tmp: Path) -> None:
    fixed(tmp).write_text("not a folder")
    assert_private_and_not(tmp, fixed(tmp))
    assert fixed(tmp).read_text() == "not a folder"


def test_a_linked_home_inside_it_is_not_used(tmp: Path) -> None:
    bait = planted(tmp)
    fixed(tmp).mkdir(mode=0o700)
    (fixed(tmp) / "data").symlink_to(bait / "data", target_is_directory=True)
    assert_private_and_not(tmp, bait)
