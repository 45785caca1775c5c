"""Nesting and depth stay fast on long parent chains (issue 26): 200k identical zero-length events (each nested
in the one before), a long OTLP parent chain, and partly overlapping ranges (a staircase). The quadratic versions
took minutes on these sizes; the timeouts are far above what the linear ones need (well under a second each), so
they fail only on a return of the quadratic behaviour."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from gputrace.otlp.encode import encode_request
from gputrace.timeline._rows import chain_depths
from gputrace.timeline.load import read_any
from gputrace.timeline.model import Lane, Timeline
from gputrace.timeline.nesting import nest_parents


def _reference_depths(parent: np.ndarray) -> np.ndarray:
    out = np.zeros(len(parent), np.int64)
    for i in range(len(parent)):
        d, x = 0, parent[i]
        while x >= 0:
            d, x = d + 1, parent[x]
        out[i] = d
    return np.minimum(out, np.iinfo(np.int16).max)


def test_chain_depths_agree_with_following_each_chain():
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 3, 17, 500):
        par = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)], dtype=np.int64)
        perm = rng.permutation(n)  # parents after their children too
        inv = np.argsort(perm)
        shuffled = np.where(par[perm] >= 0, inv[np.maximum(par[perm], 0)], -1)
        assert chain_depths(shuffled).tolist() == _reference_depths(shuffled).tolist()
        assert chain_depths(shuffled).dtype == np.int16


@pytest.mark.timeout(20)
def test_a_200k_chain_gets_its_depths_at_once():
    n = 200_000
    parent = np.arange(-1, n - 1, dtype=np.int64)
    rng = np.random.default_rng(1)
    perm = rng.permutation(n)
    inv = np.argsort(perm)
    shuffled = np.where(parent[perm] >= 0, inv[np.maximum(parent[perm], 0)], -1)
    d = chain_depths(shuffled)
    assert d[inv[0]] == 0 and d[inv[100]] == 100 and d[inv[n - 1]] == np.iinfo(np.int16).max  # capped


@pytest.mark.timeout(20)
def test_a_staircase_of_partly_overlapping_ranges_nests_in_linear_time():
    n = 100_000  # each starts inside every earlier one and ends after it: none contains another
    start = np.arange(n, dtype=np.int64)
    parent = nest_parents(start, start + 10**9, np.zeros(n, np.int64))
    assert (parent == -1).all()


@pytest.mark.timeout(20)
def test_200k_identical_zero_length_chrome_events(tmp_path):
    n = 200_000
    ev = json.dumps({"ph": "X", "name": "k", "ts": 5, "dur": 0, "pid": 1, "tid": 1}).encode()
    p = tmp_path / "zero.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents":[' + b",".join([ev] * n) + b"]}", 1))
    tl = read_any([p])
    assert tl.n == n
    assert int(tl.cols["depth"].max()) == np.iinfo(np.int16).max
    assert int((tl.cols["parent"] >= 0).sum()) == n - 1  # one chain


@pytest.mark.timeout(30)
def test_an_otlp_file_with_a_long_parent_chain(tmp_path):
    n = 60_000
    lines = []
    for lo in range(0, n, 1000):
        spans = [dict(trace_id=b"\x01" * 16, span_id=i + 1, parent_span_id=i or None, name="ntt",
                      start_ns=1_000 + i, end_ns=10**12 - i, attributes={"gputrace.lane": "thread:main"})
                 for i in range(lo, lo + 1000)]
        lines.append(encode_request({"host.name": "h"}, spans))
    p = tmp_path / "chain.jsonl"
    p.write_bytes(b"\n".join(lines[::-1]) + b"\n")  # children before their parents
    tl = read_any([p])
    assert tl.n == n
    depth_of = dict(zip(tl.cols["span_id"].tolist(), tl.cols["depth"].tolist(), strict=True))
    assert depth_of[1] == 0 and depth_of[1000] == 999 and depth_of[n] == np.iinfo(np.int16).max  # capped


def test_timeline_from_unsorted_with_a_chain_and_a_cycle():
    # A cycle (3 -> 4 -> 3) is broken at its earliest span; the chain below it gets depths from there.
    n = 200
    cols = {"start": np.arange(n, dtype=np.int64), "end": np.full(n, 10**6, np.int64),
            "lane": np.zeros(n, np.int32), "phase": np.zeros(n, np.int32),
            "span_id": np.arange(1, n + 1, dtype=np.uint64),
            "parent_span_id": np.r_[np.uint64(5), np.arange(1, n, dtype=np.uint64)].astype(np.uint64),
            "trace": np.zeros(n, np.int32)}
    cols["parent_span_id"][4] = 4  # span 5's parent is span 4, span 1's is 5: 1 -> 5 -> 4 -> 3 -> 2 -> 1
    tl = Timeline.from_unsorted(cols, ["x"], [Lane("h", 1, -1, "thread:m")], [{}], [""])
    assert (tl.cols["depth"] >= 0).all()
    assert int((tl.cols["parent"] < 0).sum()) == 1
    assert tl.cols["depth"].tolist() == _reference_depths(tl.cols["parent"]).tolist()
