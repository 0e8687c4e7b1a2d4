"""Every release the market lists has a date: its own, the day git saw its changelog entry added, or its
neighbour's; a changelog with no date anywhere is refused rather than published as 1970."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from olarespack.market import catalog as market
from olarespack.release.git import added_dates
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def changelog(*entries: tuple[str, str | None]) -> list[dict[str, object]]:
    return [
        {"version": v, "note": f"release {v}", **({"date": dt.date.fromisoformat(d)} if d else {})} for v, d in entries
    ]


def spec_with(tmp_path: Path, *entries: tuple[str, str | None]) -> Path:
    data = app_data()
    data["version"] = entries[0][0]
    data["changelog"] = changelog(*entries)
    return write_spec(tmp_path, data)


def test_undated_entries_take_the_nearest_older_date_else_the_newer(tmp_path: Path) -> None:
    spec = load_spec(spec_with(tmp_path, ("1.3.0", None), ("1.2.0", "2026-05-02"), ("1.1.0", None), ("1.0.0", None)))
    dates = [e.date for e in market.dated_spec(spec).changelog]
    # 1.3.0 has an older dated neighbour; 1.1.0 and 1.0.0 have none older, so they take 1.2.0's day
    assert dates == [dt.date(2026, 5, 2)] * 4
    times = market.release_times(market.dated_spec(spec))
    assert times == sorted(times, reverse=True) and len(set(times)) == 4


def test_a_date_git_knows_wins_over_a_neighbours(tmp_path: Path) -> None:
    spec = load_spec(spec_with(tmp_path, ("1.1.0", None), ("1.0.0", "2026-05-02")))
    dated = market.dated_spec(spec, {"1.1.0": dt.date(2026, 7, 9)})
    assert [e.date for e in dated.changelog] == [dt.date(2026, 7, 9), dt.date(2026, 5, 2)]


def test_a_changelog_without_any_date_is_refused(tmp_path: Path) -> None:
    spec = load_spec(spec_with(tmp_path, ("1.1.0", None), ("1.0.0", None)))
    with pytest.raises(market.UndatedError):
        market.dated_spec(spec)


def git(repo: Path, *args: str, day: str | None = None) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    if day:
        env |= {"GIT_AUTHOR_DATE": f"{day}T12:00:00+00:00", "GIT_COMMITTER_DATE": f"{day}T12:00:00+00:00"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@needs_git
def test_git_dates_an_entry_by_the_commit_that_added_its_line(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    spec = spec_with(tmp_path, ("1.0.5", None), ("1.0.0", "2026-05-01"))
    git(tmp_path, "add", "app.yaml")
    git(tmp_path, "commit", "-q", "-m", "1.0.5", day="2026-06-03")
    # a later release whose version starts with the same characters must not move 1.0.5's day
    spec_with(tmp_path, ("1.0.50", None), ("1.0.5", None), ("1.0.0", "2026-05-01"))
    git(tmp_path, "commit", "-q", "-am", "1.0.50", day="2026-08-20")
    spec_with(tmp_path, ("1.0.51", None), ("1.0.50", None), ("1.0.5", None), ("1.0.0", "2026-05-01"))
    assert added_dates(spec, ["1.0.51", "1.0.50", "1.0.5"]) == {
        "1.0.50": dt.date(2026, 8, 20),
        "1.0.5": dt.date(2026, 6, 3),
    }  # 1.0.51 is not committed yet


def test_outside_git_there_is_nothing_to_ask(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, ("1.0.5", None), ("1.0.0", "2026-05-01"))
    assert added_dates(spec, ["1.0.5"]) == {}


def test_publish_refuses_a_release_it_cannot_date(tmp_path: Path) -> None:
    apps = tmp_path / "apps"
    apps.mkdir()
    spec = spec_with(apps, ("1.1.0", None), ("1.0.0", None))
    code, out = run_cli(tmp_path, "publish", str(spec), "--market-dir", "market")
    assert code == 1
    assert f"{spec}: changelog[0].date: no changelog entry has a date" in out and "[changelog-date]" in out
    assert "add date: YYYY-MM-DD" in out
    assert not (tmp_path / "market").exists()
