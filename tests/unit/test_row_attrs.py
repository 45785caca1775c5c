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


def test_items_values_keys_follow_the_iteration_order():
    from gputrace.timeline.row_attrs import TemplateAttrs

    r = RowAttrs({"a": 1, "c": "x", "b": 2}, ("d", "c"), (4, "y"))  # "c" clashes: the row's value wins
    assert list(r) == ["d", "c", "a", "b"]
    assert list(r.items()) == [("d", 4), ("c", "y"), ("a", 1), ("b", 2)] == list(zip(r, map(r.__getitem__, r)))
    assert list(r.values()) == [4, "y", 1, 2] and list(r.keys()) == list(r) and r.merged() == dict(r)
    t = TemplateAttrs({"id": None, "k": [1], "corr": None, "z": 0.5}, ("id", "corr"), (7, 9))
    assert list(t) == list(t.keys()) == ["id", "k", "corr", "z"]
    assert list(t.items()) == [("id", 7), ("k", [1]), ("corr", 9), ("z", 0.5)]
    assert list(t.values()) == [7, [1], 9, 0.5] and t == {"z": 0.5, "corr": 9, "k": [1], "id": 7}
    assert t["corr"] == 9 and t.get("nope") is None and len(t) == 4
