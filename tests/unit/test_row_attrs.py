"""RowAttrs: a shared attribute dict plus per-row values, read as one Mapping."""

from __future__ import annotations

import orjson

from gputrace.timeline.row_attrs import RowAttrs


def test_reads_like_the_merged_dict():
    shared = {"a": 1, "b": [1, 2], "c": "x"}
    r = RowAttrs(shared, ("d", "c"), (4, "y"))
    want = {"a": 1, "b": [1, 2], "c": "y", "d": 4}  # per-row values win
    assert dict(r) == want and r == want and len(r) == 4
    assert r["d"] == 4 and r.get("c") == "y" and r.get("zz", 7) == 7 and "a" in r and "zz" not in r
    assert sorted(r.items()) == sorted(want.items())
    assert orjson.loads(orjson.dumps(dict(r))) == want
    assert shared == {"a": 1, "b": [1, 2], "c": "x"}  # never modified


def test_missing_key_raises_keyerror():
    r = RowAttrs({}, ("k",), (1,))
    try:
        r["other"]
    except KeyError:
        return
    raise AssertionError("no KeyError")
