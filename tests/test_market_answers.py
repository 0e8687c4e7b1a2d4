"""market/answers.py, the table serve and the exported Worker both answer from: its functions agree with
the Python of record (generation_for_olares, json.dumps, repr), its regular expressions read the same in
JavaScript, and what publish writes from it is unchanged. (test_cloudflare runs both on real requests.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from olarespack.core.errors import UsageError
from olarespack.market import answers, v1
from olarespack.olares.generations import generation_for_olares

VERSIONS = [
    "1.12.3",
    "1.12.5",
    "1.12.6",
    "1.13.0",
    "2.0",
    "1.12.6-rc.1",
    "1.12.3-0",
    "1.12.3-rc",
    "1.12.6+build.5",
    "1.12.5+b",
    "1.12",
    "1",
    "1.12.2",
    "01.12.6",
    "1.012.6",
    "abc",
    "",
    "1.12.5\n",
    "1.12.5\nx",
    " 1.12.6",
    "1.12.6 ",
    "v1.12.6",
    "1.12.6-",
    "1.12.6+",
    "1.12.6-01",
    "1.12.6-a.01",
    "1.12.6-a..b",
    "1.12.6-é",
    "\u0661.\u0661\u0662.\u0666",
    "9" * 39,
    "9" * 40,
    "1.12.6-" + "a" * 33,
    "1.12.6-" + "a" * 34,
    "99999999999999999999.0.0",
    "1.12.6-0a",
    "1.12.6-x-y.z",
    "1.12.6+a+b",
    "1.12.5-rc.1",
    "1.12.7-rc.1",
]


def _of_record(version: str) -> str | None:
    if len(version) > answers.OLARES_VERSION_MAX:
        return None
    try:
        return generation_for_olares(version)
    except UsageError:
        return None


@pytest.mark.parametrize("version", VERSIONS)
def test_the_table_picks_the_generation_olares_does(version: str) -> None:
    assert answers.olares_generation(version) == _of_record(version)


def test_the_floors_are_the_generations_dependency_ranges() -> None:
    assert answers.GENERATION_FLOORS == [((1, 12, 3), "legacy"), ((1, 12, 6), "current")]
    assert answers.table()["olares_version"]["floors"] == [[[1, 12, 3], "legacy"], [[1, 12, 6], "current"]]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
def test_javascript_reads_the_table_patterns_as_python_does() -> None:
    """The Worker compiles the same pattern texts: whole-string matches and groups must agree."""
    script = """
        const [pattern, placeholder, versions, templates] = JSON.parse(process.argv[1]);
        const whole = new RegExp(`^(?:${pattern})$`);
        const nulls = (m) => m.slice(1).map((g) => g ?? null);
        const groups = versions.map((v) => { const m = whole.exec(v); return m ? nulls(m) : null; });
        const found = templates.map((t) => [...t.matchAll(new RegExp(placeholder, "g"))].map(nulls));
        console.log(JSON.stringify([groups, found]));
    """
    templates = [f.text for f in answers.FAILURES.values()] + [answers.DETAILS_ANSWER, *answers.CHART_HEADERS.values()]
    argument = json.dumps([answers.OLARES_VERSION, answers.PLACEHOLDER, VERSIONS, templates])
    done = subprocess.run(["node", "-e", script, argument], capture_output=True, text=True, check=True, timeout=60)
    groups, found = json.loads(done.stdout)
    ours = [list(m.groups()) if (m := re.fullmatch(answers.OLARES_VERSION, v, re.ASCII)) else None for v in VERSIONS]
    assert groups == ours
    assert found == [[list(m.groups()) for m in re.finditer(answers.PLACEHOLDER, t)] for t in templates]


def test_fill_writes_values_as_python_does() -> None:
    assert answers.fill("a {x} b {y:r} c {z:r3}", x=7, y="it's", z="é\n'xyz") == "a 7 b " + repr("it's") + " c " + repr(
        "é\n'"
    )
    assert answers.failure("bad_version", version="1" * 300) == (
        400,
        f"version: {'1' * 40!r} is not an Olares version 1.12.3 or later",
    )
    assert answers.failure("too_many_ids", count=11)[1] == "app_ids: at most 10 ids per request, got 11"
    # a text's own braces are not placeholders
    assert answers.failure("not_json")[1] == 'body: not JSON; send {"app_ids": ["<id>", ...], "version": "1.12.6"}'
    with pytest.raises(KeyError):
        answers.failure("no_chart", file_name="x")


def test_every_placeholder_names_a_value_its_caller_gives() -> None:
    given = {
        "bad_version": {"version"},
        "no_generation": {"generation"},
        "no_chart": {"file_name", "name"},
        "chart_gone": {"file_name"},
        "too_many_ids": {"count"},
        "bad_page": {"page"},
        "bad_size": {"size"},
    }
    for key, found in answers.FAILURES.items():
        assert {m[1] for m in re.finditer(answers.PLACEHOLDER, found.text)} == given.get(key, set()), key
        assert 400 <= found.status < 600


def test_the_details_answer_is_the_bytes_serve_always_sent() -> None:
    found = [("b3078d17", b'{"name":"x","t":"\xc3\xa9"}'), ("\ud800\u00e9", b"{}")]
    missing = ["deadbeef", "😀", '"\\']
    before = (
        b'{"apps":{'
        + b",".join(json.dumps(i).encode() + b":" + e for i, e in found)
        + b'},"version":'
        + json.dumps("1.12\u00e9").encode()
        + b',"not_found":'
        + json.dumps(missing).encode()
        + b"}"
    )
    assert answers.details_answer(found, "1.12\u00e9", missing) == before
    assert answers.details_answer([], "1.12.6", []) == b'{"apps":{},"version":"1.12.6","not_found":[]}'


def test_static_hosts_get_serves_headers_unchanged() -> None:
    assert v1.STATIC_HEADERS == (
        "# Cloudflare Pages / Netlify header rules: the market's GET answers are JSON files without an extension.\n"
        "/api/*\n  Content-Type: application/json\n  Access-Control-Allow-Origin: *\n"
        "  Access-Control-Allow-Methods: GET, POST, OPTIONS\n  Access-Control-Allow-Headers: Content-Type\n"
    )
    assert v1.VersionedAnswer.of({"a": 1}).render("1.12.6") == b'{"version":"1.12.6","a":1}'


def test_the_table_is_plain_json() -> None:
    table = answers.table()
    assert json.loads(json.dumps(table)) == table
    assert table["failures"]["no_icon"] == {"status": 404, "text": "no such icon"}
