"""The one block splice of every in-place spec edit (core/yamledit.py: calibrate, bench --record, bump's sweep):
a key's block is found by the lines of the keys around it, at any depth, and the comments after it stay with
what follows."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML

from olarespack.core.yamledit import key_block, node_stop, splice_block

TEXT = """\
name: demo
engine:
  kind: vllm
  calibration:
    kv: 1
    # why kv is 1
    weights: 2

  # the next key's comment
  image: x
changelog:
  - version: 1.0.1
    note: second
    sweep:
      field: a
  # the older entry
  - version: 1.0.0
    note: first
"""


def load(text: str) -> tuple[Any, list[str]]:
    return YAML(typ="rt").load(text), text.splitlines(keepends=True)


def test_a_block_ends_at_its_next_sibling_or_where_its_parent_ends() -> None:
    data, lines = load(TEXT)
    assert node_stop(data, ("engine", "calibration"), len(lines)) == 9  # the line of `image:`
    assert key_block(data, ("engine", "calibration"), lines) == (3, 7)  # the blank line and image's comment stay
    assert key_block(data, ("changelog", 0, "sweep"), lines) == (13, 15)  # ends before the next entry's comment
    assert node_stop(data, ("changelog", 1), len(lines)) == len(lines)


def test_a_block_is_replaced_or_added_after_the_last_key_of_its_mapping() -> None:
    data, lines = load(TEXT)
    splice_block(data, ("engine", "calibration"), ["  calibration:\n", "    kv: 3\n"], lines)
    data, lines = load("".join(lines))
    splice_block(data, ("changelog", 1, "sweep"), ["    sweep:\n", "      field: b\n"], lines)
    splice_block(data, ("engine", "scratch"), ["  scratch: [/tmp]\n"], lines)  # after `image:`, before changelog
    text = "".join(lines)
    after = YAML(typ="safe", pure=True).load(text)
    assert after["engine"] == {"kind": "vllm", "calibration": {"kv": 3}, "image": "x", "scratch": ["/tmp"]}
    assert after["changelog"][1] == {"version": "1.0.0", "note": "first", "sweep": {"field": "b"}}
    assert "  # the next key's comment\n  image: x\n  scratch: [/tmp]\nchangelog:" in text
    assert "# why kv is 1" not in text  # a comment inside the replaced block goes with it
