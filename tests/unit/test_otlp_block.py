"""The column-wise span encoder (``gputrace.timeline.formats.otlp_jsonl.write_block``) writes the bytes of the per-row reference
(``otlp_file.reference_requests``: span dicts through ``encode_request``) on varied Timelines: Nsight
imports, synthetic traces, and hand-made rows with every attribute shape the per-row path handles
(shared sets with and without clashes, overlays of ints, bools, strings, plain dicts, names, statuses,
'%' in keys and values, block and line boundaries anywhere)."""

from __future__ import annotations

import numpy as np
import pytest

import gputrace.timeline.formats.otlp_jsonl.write_block as otlp_block
import gputrace.timeline.formats.otlp_jsonl.write as otlp_file
from gputrace.timeline.formats.otlp_jsonl.write import reference_requests, timeline_requests
from gputrace.testing.synthetic import SyntheticSpec, synthetic_timeline
from gputrace.timeline.model import Lane, Timeline
from gputrace.timeline.formats.nsys.read import read_nsys
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs
from tests.unit.nsys_random_report import random_report
from tests.unit.test_nsys import build_report


def _same_bytes(tl, max_spans=512):
    fast = list(timeline_requests(tl, max_spans=max_spans))
    ref = list(reference_requests(tl, max_spans=max_spans))
    assert len(fast) == len(ref)
    for i, (a, b) in enumerate(zip(fast, ref, strict=True)):
        assert a == b, (i, a[:300], b[:300])
    return fast


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.slow
def test_nsys_imports(tmp_path, seed, monkeypatch):
    src = random_report(tmp_path / "r.sqlite", seed=seed, n=1500)
    monkeypatch.setattr(otlp_file, "BLOCK_ROWS", 97)  # blocks end inside lines and groups
    for opts in ({}, {"runtime": False}, {"correlation_ids": True}):
        tl = read_nsys(src, **opts)
        _same_bytes(tl)
        _same_bytes(tl, max_spans=7)
    _same_bytes(read_nsys(build_report(tmp_path / "b.sqlite")), max_spans=3)


def test_synthetic_and_selected(monkeypatch):
    tl = synthetic_timeline(SyntheticSpec(hosts=2, gpus=3, target_spans=4000, seed=4))
    _same_bytes(tl)
    monkeypatch.setattr(otlp_file, "BLOCK_ROWS", 1)
    _same_bytes(tl.select(tl.cols["kind"] != 0), max_spans=5)


def _odd(attrs, names=None, n=40, seed=0) -> Timeline:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 10_000, n)
    c = {
        "start": start, "end": start + rng.integers(0, 500, n),
        "phase": rng.integers(0, 3, n).astype(np.int32), "lane": rng.integers(0, 4, n).astype(np.int32),
        "gpu_start": np.where(rng.random(n) < 0.5, start + 1, -1), "gpu_end": np.where(rng.random(n) < 0.6, start + 2, -1),
        "nbytes": np.where(rng.random(n) < 0.3, rng.integers(0, 1 << 40, n), -1),
        "circuit": np.where(rng.random(n) < 0.3, rng.integers(0, 9, n), -1).astype(np.int32),
        "batch": np.where(rng.random(n) < 0.3, rng.integers(0, 9, n), -1).astype(np.int32),
        "kind": rng.integers(-2, 6, n).astype(np.int8), "status": rng.integers(-1, 3, n).astype(np.int8),
        "span_id": np.where(rng.random(n) < 0.2, 0, np.arange(1, n + 1)).astype(np.uint64),
        "parent_span_id": np.where(rng.random(n) < 0.5, rng.integers(0, n, n), 0).astype(np.uint64),
        "resource": rng.integers(-1, 3, n).astype(np.int32), "trace": rng.integers(-1, 4, n).astype(np.int32),
    }
    lanes = [Lane("h", 1, -1, "thread:main"), Lane("h", 1, 0, "stream:7"), Lane("", -1, 1, 'stream:"9%"'),
             Lane("g", 3, -1, "thread:w")]
    resources = [{"service.name": "a", "process.pid": 1}, {"service.name": "b%s", "host.name": "x"}, {}]
    return Timeline.from_unsorted(c, ["zeta", "al%dpha", "mi\"d"], lanes, resources,
                                  ["AB" * 16, "", "0123456789abcdef" * 2], attrs, names or {})


def test_every_attribute_shape(monkeypatch):
    shared = {"cuda.grid": [4, 1, 1], "s": "x%sy", "f": 0.25, "b": True, "t": (1, "two")}
    pct = {"k%d": 5, "v": "100%"}
    clash_col = {"gputrace.batch": 9, "z": 1}  # a column key: where the column is unset, this value is written
    clash_over = {"corr": 1, "q": 2}
    template = {"id": None, "s": "x%sy", "corr": None, "f": 0.25, "g": [4, 1, 1], "b": False}
    pct_template = {"v%": "50%", "k%d": None}
    clash_template = {"z": 1, "gputrace.batch": None}
    kinds = [
        lambda i: RowAttrs(shared, ("corr", "api%"), (i, 1 << 62)),
        lambda i: RowAttrs(shared, (), ()),
        lambda i: RowAttrs({}, ("corr",), (i,)),
        lambda i: RowAttrs({}, (), ()),
        lambda i: RowAttrs(pct, ("corr",), (-i,)),
        lambda i: RowAttrs(shared, ("corr",), (True,)),  # a bool overlay: per-row path
        lambda i: RowAttrs(shared, ("corr",), ("text%s",)),
        lambda i: RowAttrs(clash_col, ("corr",), (i,)),
        lambda i: RowAttrs(clash_over, ("corr",), (i,)),
        lambda i: RowAttrs(shared, ("corr", "corr"), (i, i + 1)),
        # TemplateAttrs (shared Kineto args): the template's order, the row's ids in their places
        lambda i: TemplateAttrs(template, ("id", "corr"), (i, -i)),
        lambda i: TemplateAttrs(template, ("corr", "id"), (i, 1 << 62)),  # overlay keys not in template order
        lambda i: TemplateAttrs(template, ("id", "corr"), (True, i)),  # a bool: per-row path
        lambda i: TemplateAttrs(template, ("id", "corr"), (i, "x%s")),
        lambda i: TemplateAttrs(pct_template, ("k%d",), (i,)),
        lambda i: TemplateAttrs(clash_template, ("gputrace.batch",), (i,)),  # a column key: per-row path
        lambda i: {"plain": i, "gputrace.circuit": 4},
        # plain dicts of ints and strings: one %-format per layout and string values
        lambda i: {"External id": i, "cbid": 211, "correlation": i + 1 << 41, "chrome.cat": "cuda_runtime"},
        lambda i: {"s": 'x%s"y\u00e9\n', "n": -(1 << 70) - i, "k%d": "%d"},
        lambda i: {"u": f"unique {i} %", "i": i},
        lambda i: {"b": i, "flag": True},  # a bool: per-row path
        lambda i: {},
        lambda i: shared,
        lambda i: None,
    ]
    for seed in range(4):
        attrs = {}
        for r in range(40):
            a = kinds[(r + seed) % len(kinds)](r)
            if a is not None:
                attrs[r] = a
        tl = _odd(attrs, names={3: "renamed%", 5: "", 7: "zeta"}, seed=seed)
        _same_bytes(tl)
        monkeypatch.setattr(otlp_file, "BLOCK_ROWS", 3)
        _same_bytes(tl, max_spans=2)
        monkeypatch.setattr(otlp_block, "_MAX_BAKED", 1)  # string values past the bound: per-row path
        _same_bytes(tl)
        monkeypatch.undo()


def test_a_bad_trace_id_fails_as_the_reference_does():
    tl = _odd({}, seed=1)
    tl.trace_ids[0] = "not hex at all, but 32 chars!!!!"
    with pytest.raises(ValueError):
        list(reference_requests(tl))
    with pytest.raises(ValueError):
        list(timeline_requests(tl))


def test_a_split_write_gives_the_same_bytes(tmp_path, monkeypatch):
    """Two processes (the second half of the lines encoded by a forked child, then appended) or one: the
    same file; a child that fails leaves its half to the parent, still the same file."""
    import os

    import gputrace.timeline.formats.otlp_jsonl.write_split as split
    from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl

    tl = synthetic_timeline(SyntheticSpec(hosts=2, gpus=3, target_spans=3000, seed=4))
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    n1 = write_otlp_jsonl(tl, one, max_spans=64, workers=1)
    for max_spans in (64, 1000, 5000):
        write_otlp_jsonl(tl, one, max_spans=max_spans, workers=1)
        assert write_otlp_jsonl(tl, two, max_spans=max_spans, workers=2) == len(one.read_bytes().splitlines())
        assert two.read_bytes() == one.read_bytes()
    assert n1 > 2
    parent = os.getpid()
    real = otlp_file.timeline_requests

    def child_fails(*a, **k):
        if os.getpid() != parent:
            (tmp_path / "child_failed").touch()
            raise RuntimeError("child down")
        return real(*a, **k)

    write_otlp_jsonl(tl, one, max_spans=1000, workers=1)
    monkeypatch.setattr(otlp_file, "timeline_requests", child_fails)
    write_otlp_jsonl(tl, two, max_spans=1000, workers=2)
    assert two.read_bytes() == one.read_bytes()
    assert (tmp_path / "child_failed").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no part or temporary file left
    assert split.split_workers(10) == 1  # small: never split
