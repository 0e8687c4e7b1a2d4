"""The rendered diff as markdown for a pull-request comment: what a box sees first, then the pods field by
field (args per argument, JSON values per key), then the other resources, then the chart's own files folded:
a line repeated across files is shown once, and a long line that only restates a change said above (the
preset section's engine-args line) is named in one line.

All of it but the layout comes from the pull request (specs, charts, versions, file and app names), so
it is shown as text wherever it lands: inline as a code span or backslash-escaped, with any word GitHub
would link by itself (a URL, a www. name, an e-mail address, an @mention, a #reference) in a code span;
in our <details> summaries (raw HTML) HTML-escaped; diffs fenced longer than any run of backticks they
hold. A value's line breaks never reach the markdown: a new line could open a block (an HTML one)."""

from __future__ import annotations

import contextlib
import difflib
import html
import json
import re
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from olarespack.release.diff import AppDiff, ResourceChange

_LONG = 100  # a file line longer than this that restates a change is named, not shown
_EXCERPT = 40  # characters kept on either side of the change in a longer line
_WORD = re.compile(r"\s+|[\w\-/]+(?:\.[\w\-/]+)*|[^\w\s]")  # 0.94 and v1.2.0 are one word, "160K." is not
_CONTAINERS = re.compile(r"(^|\.)(initContainers|containers)\[")
Setting = tuple[str, str | None, str | None]  # what, before (None: added), after (None: removed)
EMPTY = '""'


@dataclass
class _Said:
    """The words of the changes stated so far: a file line whose edits use only these restates them."""

    old: set[str] = field(default_factory=set)
    new: set[str] = field(default_factory=set)

    def add(self, old: str | None, new: str | None) -> None:
        self.old |= _words(old or "")
        self.new |= _words(new or "")

    def covers(self, removed: set[str], added: set[str]) -> bool:
        return bool(removed or added) and removed <= self.old and added <= self.new


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text) if not w.isspace()}


# GitHub links these words in text by itself: URLs (a scheme's colon), www. names, e-mail addresses, @mentions
# and #references; such a word is shown in a code span, where nothing is linked
_LINKABLE = re.compile(r":\S|www\.|@|#", re.IGNORECASE)
# what opens or closes inline markup anywhere in a line: emphasis, code, links and images, raw HTML, entities,
# table cells, strikethrough, math. -, >, +, = and digits mean something only at a line's start, where no
# value is ever put
_MARKUP = re.compile(r"[\\`*_\[\]<&|~$]")
_BREAK = re.compile(r"\r\n?|\n")
_SPACES = re.compile(r"(\s+)")


def _one_line(value: str) -> str:
    return _BREAK.sub(lambda m: "\\r" if m.group() == "\r" else "\\n", value)


def _fence(lines: list[str] | tuple[str, ...], mark: str = "```") -> str:
    """A fence longer than any run of its character in lines: no line can close it."""
    runs = [len(r) for line in lines for r in re.findall(f"{re.escape(mark[0])}+", line)]
    return mark[0] * max(len(mark), max(runs, default=0) + 1)


def _code(value: str) -> str:
    """A markdown code span showing value on one line (a longer fence when it holds backticks)."""
    value = _one_line(value)
    fence = _fence([value], "`")
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def text(value: str) -> str:
    """Markdown showing value as text in a line: markup characters escaped, linkable words in code spans."""
    return "".join(
        _code(word) if _LINKABLE.search(word) else _MARKUP.sub(lambda m: f"\\{m.group()}", word)
        for word in _SPACES.split(_one_line(value))
        if word
    )


def html_text(value: str, code: bool = False) -> str:
    """value for our raw-HTML summaries (markdown is not read there): escaped, linkable words in <code>."""
    words = [_one_line(value)] if code else _SPACES.split(_one_line(value))
    return "".join(
        f"<code>{html.escape(word)}</code>" if code or _LINKABLE.search(word) else html.escape(word)
        for word in words
        if word
    )


def _short(value: str, limit: int = 80) -> str:
    value = _one_line(value)
    return value if len(value) <= limit else f"{value[: limit // 2 - 1]}…{value[-(limit // 2 - 1) :]}"


def _flatten(value: Any, path: str = "", out: dict[str, str] | None = None) -> dict[str, str]:
    """path -> scalar text; items of lists keyed by their name when they all have one, JSON objects in
    strings by key (SPEC_CONFIG.num_speculative_tokens)."""
    out = {} if out is None else out
    if isinstance(value, str) and value.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            value = json.loads(value) if isinstance(json.loads(value), dict) else value
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value:
        names = [item.get("name") if isinstance(item, dict) else None for item in value]
        named = all(isinstance(n, str) for n in names) and len(set(names)) == len(names)
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{names[i] if named else i}]", out)
    else:
        out[path] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not arg[1:2].isdigit()


def _arguments(args: list[Any]) -> dict[str, str]:
    """An argv by argument: `--flag` -> its value ("" for a switch), the others by position."""
    items: dict[str, str] = {}
    i, position = 0, 0
    while i < len(args):
        arg = str(args[i])
        value = str(args[i + 1]) if _is_flag(arg) and i + 1 < len(args) and not _is_flag(str(args[i + 1])) else None
        if not _is_flag(arg):
            position += 1
            items[f"argument {position}"] = arg
        else:  # a repeated flag (--lora-modules a --lora-modules b): one key per occurrence
            repeat = sum(1 for key in items if key == arg or key.startswith(f"{arg} #"))
            items[f"{arg} #{repeat + 1}" if repeat else arg] = value or ""
        i += 1 if value is None else 2
    return items


def _changes(old: dict[str, str], new: dict[str, str], prefix: str = "") -> list[Setting]:
    return [
        (f"{prefix}{key}", old.get(key), new.get(key))
        for key in [*new, *(k for k in old if k not in new)]
        if old.get(key) != new.get(key)
    ]


def _container_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Setting]:
    args = [_arguments(c.get("args") or []) for c in (old, new)]
    found = _changes(_flatten(args[0]), _flatten(args[1]))
    if list(args[0]) != list(args[1]) and args[0] == args[1]:
        found.append(("argument order", " ".join(args[0]), " ".join(args[1])))
    env = [
        _flatten(
            {
                str(e.get("name")): e.get("value", {k: v for k, v in e.items() if k != "name"})
                for e in c.get("env") or []
            }
        )
        for c in (old, new)
    ]
    rest = [_flatten({k: v for k, v in c.items() if k not in ("args", "env", "name")}) for c in (old, new)]
    return found + _changes(env[0], env[1], "env ") + _changes(rest[0], rest[1])


def _say(key: str, old: str | None, new: str | None) -> str:
    if old is None or new is None:
        return _code(f"add {key} {_short(new or '')}".rstrip() if old is None else f"drop {key}")
    if "\n" in old or "\n" in new:
        lines = sum(1 for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:1] in "+-")
        return f"{_code(key)}: {lines} line(s) changed (rendered diff below)"
    return _code(f"{key} {_short(old or EMPTY)} -> {_short(new or EMPTY)}")


def _pod_spec(document: dict[str, Any] | None) -> dict[str, Any]:
    spec = (document or {}).get("spec") or {}
    if (document or {}).get("kind") == "Pod":
        return dict(spec)
    template = spec.get("template") or ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    return dict(template.get("spec") or {})


def _pod_lines(change: ResourceChange, said: _Said) -> list[str]:
    """A changed workload's settings, each once: per container, then the rest of the resource."""
    old, new = _pod_spec(change.old), _pod_spec(change.new)
    lines: list[str] = []
    for group, label in (("initContainers", "init container"), ("containers", "container")):
        before = {str(c.get("name")): c for c in old.get(group) or []}
        after = {str(c.get("name")): c for c in new.get(group) or []}
        for name in [*after, *(n for n in before if n not in after)]:
            if name not in after or name not in before:
                image = str((after.get(name) or before.get(name) or {}).get("image", ""))
                lines.append(f"- {label} {_code(name)} {'added' if name in after else 'removed'} ({_code(image)})")
                continue
            found = _container_changes(before[name], after[name])
            lines += [f"- {label} {_code(name)}:"] if found else []
            for key, was, now in found:
                lines.append(f"  - {_say(key, was, now)}")
                said.add(None if was is None else f"{key} {was}", None if now is None else f"{key} {now}")
    rest = [{k: v for k, v in _flatten(d or {}).items() if not _CONTAINERS.search(k)} for d in (change.old, change.new)]
    for key, was, now in _changes(rest[0], rest[1]):
        lines.append(f"- {_say(key, was, now)}")
        said.add(was, now)
    return lines


def _line_pairs(diff: tuple[str, ...]) -> list[tuple[str | None, str | None]]:
    """A unified diff's removed and added lines, paired in order within each run of edits."""
    pairs: list[tuple[str | None, str | None]] = []
    runs: tuple[list[str], list[str]] = ([], [])
    for line in (*diff, " "):
        if line[:1] not in "-+" or (line[:1] == "-" and runs[1]):
            pairs += [
                (a if i < len(runs[0]) else None, b if i < len(runs[1]) else None)
                for i, (a, b) in enumerate(zip_longest(*runs, fillvalue=""))
            ]
            runs[0].clear()
            runs[1].clear()
        if line[:1] in "-+":
            runs[line[:1] == "+"].append(line[1:])
    return pairs


def _edits(old: str, new: str) -> tuple[set[str], set[str], tuple[int, int], tuple[int, int]]:
    """The words removed and added, and the spans of old and of new (in characters) that changed."""
    a, b = _WORD.findall(old), _WORD.findall(new)
    removed: set[str] = set()
    added: set[str] = set()
    spans: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed |= {w for w in a[i1:i2] if not w.isspace()}
            added |= {w for w in b[j1:j2] if not w.isspace()}
            spans.append((len("".join(a[:i1])), len("".join(a[:i2])), len("".join(b[:j1])), len("".join(b[:j2]))))
    spans = spans or [(0, len(old), 0, len(new))]
    return removed, added, (spans[0][0], spans[-1][1]), (spans[0][2], spans[-1][3])


def _excerpt(text: str, span: tuple[int, int]) -> str:
    if len(text) <= _LONG + 2 * _EXCERPT:
        return text
    start = max(span[0] - _EXCERPT, 0)
    end = min(span[1] + _EXCERPT, start + _LONG + 2 * _EXCERPT, len(text))  # bounded, whatever changed
    return f"{'…' if start else ''}{text[start:end]}{'…' if end < len(text) else ''}"


_IN_FILE = re.compile(r"^(?P<spec>[^:]+): (?P<file>[^:]+\.yaml): (?P<said>.*)$")


def _grouped(warnings: list[str]) -> list[str]:
    """Warnings that say one thing of several chart files (each locale's manifest), said once naming them."""
    files: dict[tuple[str, str], list[str]] = {}
    alone: list[str] = []
    for warning in warnings:
        if match := _IN_FILE.match(warning):
            files.setdefault((match["spec"], match["said"]), []).append(match["file"])
        else:
            alone.append(warning)
    return [f"{spec}: {said} ({', '.join(names)})" for (spec, said), names in files.items()] + alone


def _around(text: str, span: tuple[int, int]) -> str:
    """The changed span of a long line with a few words either side, at most about 160 characters."""
    start, end = max(span[0] - 40, 0), min(max(span[1], span[0]) + 40, len(text))
    end = min(end, start + 160)
    return f"{'…' if start else ''}{text[start:end]}{'…' if end < len(text) else ''}"


def _file_block(changes: list[ResourceChange], said: _Said) -> list[str]:
    """The chart's own files in one diff block: a line repeated across files shown once under all their
    names, a long line that only restates what is said above named in one line."""
    groups: dict[tuple[str | None, str | None], list[str]] = {}
    for change in changes:
        for old, new in _line_pairs(change.diff):
            files = groups.setdefault((None if old is None else old.strip(), None if new is None else new.strip()), [])
            files += [] if change.key in files else [change.key]
    body: list[str] = []
    header = ""
    for (old, new), files in groups.items():
        if header != (header := f"@@ {', '.join(files)} @@"):
            body.append(header)
        removed, added, old_span, new_span = _edits(old or "", new or "")
        if old is not None and new is not None and len(new) > _LONG and said.covers(removed, added):
            # the change itself stays in view (a store description's claim beside a new setting), only the rest
            # of the long line is left out
            body += [f"-{_around(old, old_span)}", f"+{_around(new, new_span)}  (same change as above)"]
            continue
        said.add(" ".join(removed), " ".join(added))
        body += [f"-{_excerpt(old, old_span)}"] if old is not None else []
        body += [f"+{_excerpt(new, new_span)}"] if new is not None else []
    fence = _fence(body)
    return [f"{fence}diff", *body, fence]


def _box(
    diff: AppDiff, pods: list[ResourceChange], others: list[ResourceChange], files: list[ResourceChange], note: str
) -> str:
    """What a box running the base version sees."""
    if diff.base_version is None:
        return f"New app: a box can install {text(diff.version)}."
    base, version = text(diff.base_version), text(diff.version)
    head = (
        f"A box on {base} is offered {version}:"
        if diff.version_raised
        else f"A box on {base} is offered **no upgrade**: the chart changed but its version did not "
        "rise (run `olarespack bump --patch`). Once raised:"
    )
    parts = [text(note.rstrip("."))]
    parts += ["the pods are not restarted"] if pods and all(_pod_spec(c.old) == _pod_spec(c.new) for c in pods) else []
    parts += [f"{len(others)} other resource(s) change"] if others else []
    parts += [f"{len(files)} chart file(s) change"] if files else []
    return f"{head} {'; '.join(parts)}."


def _details(summary_html: str, lines: tuple[str, ...]) -> list[str]:
    fence = _fence(lines)
    return [f"<details><summary>{summary_html}</summary>\n", f"{fence}diff", *lines, f"{fence}\n</details>\n"]


def as_markdown(diffs: list[AppDiff]) -> str:
    from olarespack.release.notes import stale_figures, upgrade_note  # notes reads AppDiff from here

    out: list[str] = []
    for diff in (d for d in diffs if d.changed):
        gate = "" if diff.version_raised else " **(version not raised)**"
        out.append(f"### {_code(diff.app)} {text(diff.base_version or 'new')} -> {text(diff.version)}{gate}\n")
        pods = [c for c in diff.changes if _pod_spec(c.old) or _pod_spec(c.new)]
        others = [c for c in diff.changes if c not in pods and (c.old or c.new)]
        files = [c for c in diff.changes if c not in pods and c not in others]
        note = upgrade_note(diff)
        out.append(f"{_box(diff, pods, others, files, note)}\n")
        out += [f"> **Check:** {text(warning)}\n" for warning in _grouped(stale_figures(diff))]  # as bump warns
        said = _Said()
        said.add(f"{diff.base_version} {note}", f"{diff.version} {note}")  # "Context 128K -> 160K" is said
        out += ["#### Pods\n"] if pods else []
        for change in pods:
            lines = _pod_lines(change, said) if change.change == "changed" else []
            out += [
                f"{_code(change.key)} {change.change}" + (":\n" if lines else "\n"),
                *lines,
                *([""] if lines else []),
            ]
            out += _details(f"{html_text(change.key, code=True)} {change.change}", change.diff)
        out += ["#### Other resources\n"] if others else []
        for change in others:
            out += _details(f"{html_text(change.key, code=True)} {change.change}", change.diff)
            said.add("\n".join(change.diff), "\n".join(change.diff))
        if files:
            names = ", ".join(html_text(c.key) for c in files)
            out += [
                "#### Chart files and store listing\n",
                f"<details><summary>{len(files)} file(s): {names}</summary>\n",
                *_file_block(files, said),
                "</details>\n",
            ]
    return "\n".join(out) if out else "No rendered change.\n"
