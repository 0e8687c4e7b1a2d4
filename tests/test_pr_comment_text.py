"""The pull-request comment shows the pull request's text as text: rendered as GitHub does (CommonMark with
raw HTML and tables), no link, image, HTML tag or comment, and no word GitHub links by itself (a URL, a www.
name, an e-mail address, an @mention) comes from a spec, a chart, a version, a file or app name."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from conftest import spec_version
from olarespack.release.diff import AppDiff, ResourceChange, as_markdown
from olarespack.release.markdown import html_text, text
from test_release import VISION, replace_in, run

RENDERER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
LINK = "[APPROVED by maintainers](https://evil.example)"
HOSTILE = (
    LINK,
    "![x](https://evil.example/p.png)",
    "</details>",
    "<!--",
    "<img src=x>",
    "https://evil.example",
    "www.evil.example",
    "x@evil.example",
    "@alice",
    "```` ~~~~",
    "| a | b |",
    "&lt;b&gt;",
    "*em* _em_ ~~s~~ $m$",
)
PAYLOAD = " ".join(HOSTILE)
# what GitHub links in text by itself (cmark-gfm's autolinks, GitHub's mentions)
AUTOLINK = re.compile(r"\b[a-z][a-z0-9+.-]*:(//)?[^\s<]|www\.|\w@\w|(^|\W)@\w", re.IGNORECASE)
# our own markup in the comment: the hidden marker, the folded sections, code and the run link's <sub>
OURS = re.compile(r"<!-- olarespack-pr-review -->|</?(details|summary|code|sub)>")


def walk(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        yield from walk(token.children or [])


def pr_markup(markdown: str, own_links: tuple[str, ...] = ()) -> list[str]:
    """What in the rendered markdown is markup rather than text, beyond our own: links, images, HTML tags
    and comments, and text that GitHub would turn into a link."""
    found: list[str] = []
    for token in walk(RENDERER.parse(markdown)):
        if (token.type == "link_open" and str(token.attrGet("href")) not in own_links) or token.type == "image":
            found.append(f"{token.type}: {token.attrs}")
        elif token.type in ("html_block", "html_inline"):
            if "<" in OURS.sub("", token.content):
                found.append(f"{token.type}: {token.content!r}")
            if AUTOLINK.search(html.unescape(OURS.sub(" ", re.sub(r"<code>.*?</code>", " ", token.content)))):
                found.append(f"linkable text in HTML: {token.content!r}")
        elif token.type == "inline":  # text tokens joined: markdown-it splits them at punctuation
            words = "".join(t.content if t.type == "text" else "\0" for t in token.children or [])
            if AUTOLINK.search(words):
                found.append(f"linkable text: {words!r}")
    return found


def visible(markdown: str) -> str:
    """The text a reader sees, one line per block (code and HTML text included)."""
    out: list[str] = []
    for token in RENDERER.parse(markdown):
        if token.type == "inline":
            out.append("".join(t.content if t.type in ("text", "code_inline") else " " for t in token.children or []))
        elif token.type in ("fence", "code_block"):
            out.append(token.content)
        elif token.type == "html_block":
            out.append(html.unescape(re.sub(r"<[^>]*>", "", token.content)))
    return "\n".join(out)


def test_text_and_html_text_show_any_value_as_it_is_and_link_nothing() -> None:
    for value in (*HOSTILE, PAYLOAD, "a\\b `c` ``d", "\\[not a link\\](x)", "line\n<!--\r\n</details>"):
        shown = f"A box on {text(value)}."
        assert pr_markup(shown) == [], value
        one_line = value.replace("\r\n", "\n").replace("\n", "\\n")
        assert visible(shown) == f"A box on {one_line}.", value
        summary = f"<details><summary>{html_text(value)} <code>x</code> {html_text(value, code=True)}</summary>\n"
        assert pr_markup(summary) == [], value
    assert text("Context 128K -> 160K") == "Context 128K -> 160K"  # plain words read as they are


def deployment(containers: list[dict[str, Any]], **metadata: Any) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "app", **metadata},
        "spec": {"template": {"spec": {"containers": containers}}},
    }


def hostile_diffs() -> list[AppDiff]:
    """Every string the comment quotes, from the PR: spec values in args and env, images, container and
    resource names, chart file names and lines, the app's name and version."""
    old = deployment(
        [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v1",
                "args": ["m", "--x", "1", LINK],
                "env": [{"name": "E", "value": "1"}],
            }
        ]
    )
    new = deployment(
        [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v1",
                "args": ["m", "--x", PAYLOAD, f"--{LINK}"],
                "env": [{"name": "E", "value": PAYLOAD}],
            },
            {"name": "<img src=x>`", "image": LINK},
        ],
        annotations={"note": "line\n</details>\n<!--"},
    )
    pod = ResourceChange("Deployment/<img src=x>", "changed", ("-a", f"+{PAYLOAD}", "+`````", "+</details>"), old, new)
    other = ResourceChange(
        "Service/</details><!--",
        "changed",
        (f"-{LINK}", "+<!--"),
        {"kind": "Service"},
        {"kind": "Service", "spec": {"x": PAYLOAD}},
    )
    files = ResourceChange(
        "i18n/<img src=x>/https://evil.example/OlaresManifest.yaml",
        "changed",
        ("@@ -1 +1 @@", "-  description: old", f"+  description: {PAYLOAD}", "+````````"),
    )
    added = ResourceChange(f"ConfigMap/{LINK}", "added", (f"+{PAYLOAD}",), None, {"kind": "ConfigMap"})
    return [
        AppDiff("</details>`x@evil.example", "apps/app.yaml", "1.0.0", "1.0.1", (files, other, pod)),
        AppDiff(LINK, "apps/new.yaml", None, f"1.0.0+{PAYLOAD}", (added,)),
    ]


def test_the_diff_markdown_shows_every_hostile_value_as_text() -> None:
    out = as_markdown(hostile_diffs())
    assert (found := pr_markup(out)) == [], "\n".join(found)
    seen = visible(out)
    box = next(line for line in seen.splitlines() if line.startswith("A box on 1.0.0 is offered 1.0.1:"))
    assert PAYLOAD in box  # the upgrade note quotes the new --x value as it is
    assert f"New app: a box can install 1.0.0+{PAYLOAD}." in seen
    assert "container <img src=x>` added (" + LINK + ")" in seen
    # our folded sections still fold: every quoted diff sits inside one of them
    tokens = RENDERER.parse(out)
    opened = [t for t in tokens if t.type == "html_block" and t.content.startswith("<details><summary>")]
    closed = [t for t in tokens if t.type == "html_block" and t.content.strip().endswith("</details>")]
    assert len(opened) == len(closed) == 4
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 4 and all(t.info == "diff" for t in fences)
    assert any("+</details>" in t.content and "+`````" in t.content for t in fences)


@pytest.mark.helm
def test_a_hostile_spec_renders_a_comment_of_text(repo: Path) -> None:
    """The real diff of a spec whose extra_args, env, title, descriptions and changelog note carry markup."""
    spec = repo / "apps/gemma4-vision.yaml"
    quoted = PAYLOAD.replace("'", "''")
    replace_in(
        spec,
        "  tool_call_parser: gemma4\n",
        f"  tool_call_parser: gemma4\n  extra_args: ['--root-path', '{quoted}']\n  env: {{EVIL: '{quoted}'}}\n",
    )
    replace_in(spec, "  title: Gemma 4 26B Vision One\n", "  title: '[x](https://evil.example)<b>'\n")
    replace_in(spec, "  description: >-\n    Gemma 4", f"  description: >-\n    {PAYLOAD.replace('*', '')} Gemma 4")
    current = spec_version("gemma4-vision")
    major, minor, patch = current.split(".")
    version = f"{major}.{minor}.{int(patch) + 1}-www.evil.example"  # a prerelease GitHub would link as a www. name
    replace_in(spec, "changelog:\n", f"changelog:\n  - version: {version}\n    note: '{quoted}'\n")
    replace_in(spec, f"version: {current}\nhardware", f"version: {version}\nhardware")
    code, out, err = run("diff", "--format", "markdown")
    assert code == 0, err
    assert out.startswith(f"### `{VISION}` {current} -> `{version}`\n")
    assert (found := pr_markup(out)) == [], "\n".join(found)
    seen = visible(out)
    assert f"`--root-path`: {PAYLOAD}" in seen.splitlines()[1]  # the box line, as the spec wrote it
    assert "[x](https://evil.example)<b>" in seen and "evil.example/p.png" in seen
