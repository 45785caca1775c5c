"""Timeline.from_unsorted / concat: parent linking across traces, depth, cycles, attrs remap."""

from __future__ import annotations

import numpy as np
import pytest

from gputrace.timeline import Lane, Timeline


def _tl(rows, lanes=(Lane("h", 1, 0, "stream:0"),), attrs=None):
    cols = {k: np.array([r[i] for r in rows]) for i, k in enumerate(("start", "end", "trace", "span_id", "parent_span_id", "phase"))}
    cols["span_id"] = cols["span_id"].astype(np.uint64)
    cols["parent_span_id"] = cols["parent_span_id"].astype(np.uint64)
    cols["lane"] = np.zeros(len(rows), np.int32)
    return Timeline.from_unsorted(cols, ["prove", "ntt", "intt_abc"], list(lanes), [], ["t0", "t1"], attrs)


def test_parents_and_depth_with_duplicate_ids_across_traces():
    rows = [
        (30, 40, 1, 5, 6, 2),  # trace 1: 5 -> 6 -> 7
        (0, 100, 0, 7, 0, 0),  # trace 0 root id 7
        (10, 50, 0, 5, 7, 1),  # trace 0: 5 -> 7
        (0, 100, 1, 7, 0, 0),
        (20, 60, 1, 6, 7, 1),
        (11, 12, 0, 9, 5, 2),  # trace 0: 9 -> 5 -> 7
    ]
    tl = _tl(rows)
    by = {(int(tl.trace[r]), int(tl.span_id[r])): r for r in range(tl.n)}
    for (t, sid), r in by.items():
        p = int(tl.parent[r])
        want_parent = {(0, 5): 7, (0, 9): 5, (1, 5): 6, (1, 6): 7}.get((t, sid))
        if want_parent is None:
            assert p == -1 and tl.depth[r] == 0
        else:
            assert (int(tl.trace[p]), int(tl.span_id[p])) == (t, want_parent)
    assert tl.depth[by[(0, 9)]] == 2 and tl.depth[by[(1, 5)]] == 2


def test_self_parent_and_missing_parent_are_roots():
    tl = _tl([(0, 10, 0, 1, 1, 0), (1, 2, 0, 2, 99, 1)])
    assert tl.parent.tolist() == [-1, -1] and tl.depth.tolist() == [0, 0]


def test_attrs_follow_rows_through_sorting_and_concat():
    rows = [(50, 60, 0, 1, 0, 0), (10, 20, 0, 2, 0, 1)]
    tl = _tl(rows, attrs={0: {"x": "late"}, 1: {"x": "early"}})
    assert [tl.attrs.get(r, {}).get("x") for r in range(tl.n)] == ["early", "late"]
    both = Timeline.concat([tl, _tl([(5, 6, 1, 3, 0, 2)], attrs={0: {"x": "first"}})])
    assert [both.attrs[r]["x"] for r in range(both.n)] == ["first", "early", "late"]
    assert both.load_report is None


def test_span_names_follow_rows_through_concat_and_select():
    # Timeline.names (a Chrome import's original span names) used to be dropped by concat and select,
    # so name_of fell back to the phase name (e.g. read_any of a Chrome file and an OTLP file).
    rows = [(50, 60, 0, 1, 0, 0), (10, 20, 0, 2, 0, 1)]
    tl = _tl(rows)
    tl.names = {1: "ntt_late"}  # row 1 (start 50) of the sorted timeline
    assert [tl.name_of(r) for r in range(tl.n)] == ["ntt", "ntt_late"]
    both = Timeline.concat([_tl([(5, 6, 1, 3, 0, 2)]), tl])
    assert [both.name_of(r) for r in range(both.n)] == ["intt_abc", "ntt", "ntt_late"]
    sel = both.select(both.start >= 10)
    assert [sel.name_of(r) for r in range(sel.n)] == ["ntt", "ntt_late"]


def _lexsort_order(lane, start, end):
    return np.lexsort((-end, start, lane))


def test_row_order_is_lexsort_order_with_ties_and_wide_ranges():
    # row_order's 64-bit key (lane << s | start - min) must give exactly lexsort's stable order: ties in
    # (lane, start) broken by -end, full ties by input order; lexsort itself where the key does not fit.
    from gputrace.timeline._rows import row_order

    rng = np.random.default_rng(7)
    cases = []
    for n, lanes, span in ((1, 1, 10), (2000, 3, 5), (5000, 40, 1000), (3000, 1, 3), (4000, 200, 1 << 40)):
        lane = rng.integers(0, lanes, n).astype(np.int32)
        start = rng.integers(0, span, n) + 1_767_225_600_000_000_000
        end = start + rng.integers(0, 4, n)
        cases.append((lane, start, end))
    wide = rng.integers(-(1 << 62), 1 << 62, 1000)  # start times spanning more than the key holds
    cases.append((rng.integers(0, 4, 1000).astype(np.int32), wide, wide + rng.integers(0, 3, 1000)))
    ext = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max, 0], dtype=np.int64)  # -end wraps as in lexsort
    cases.append((np.zeros(4, np.int32), np.zeros(4, np.int64), ext))
    cases.append((np.array([3, -1, 0, 3], np.int32), np.array([5, 5, 5, 5]), np.array([6, 7, 8, 9])))  # negative lane
    for lane, start, end in cases:
        got = row_order(lane, start, end)
        assert np.array_equal(got, _lexsort_order(lane, start, end))
    assert row_order(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_depths_and_cycles_match_the_plain_parent_walk():
    # short_depths (depth passes that double as the cycle check) must give the depths of the plain walk,
    # and fall back to the cycle breaker for chains of more than 64 levels and for cycles.
    rng = np.random.default_rng(3)
    n = 300
    rows = []
    for i in range(n):
        parent = 0 if i == 0 or rng.random() < 0.1 else int(rng.integers(1, i + 1))  # ids 1..i: a forest
        rows.append((i, i + 10, 0, i + 1, parent, 0))
    chain = [(1000 + i, 2000, 0, 5000 + i, 5000 + i - 1 if i else 0, 1) for i in range(100)]  # 100 levels
    cyc = [(3000, 3010, 0, 9001, 9003, 2), (3001, 3011, 0, 9002, 9001, 2), (3002, 3012, 0, 9003, 9002, 2)]
    for data in (rows, rows + chain, rows + chain + cyc):
        tl = _tl(data)
        par = tl.parent
        want = np.zeros(tl.n, np.int64)
        for r in range(tl.n):  # plain walk (no cycles are left after from_unsorted)
            p, d = int(par[r]), 0
            while p >= 0:
                d, p = d + 1, int(par[p])
            want[r] = d
        assert tl.depth.tolist() == want.tolist()
    root = {int(tl.span_id[r]): int(tl.parent[r]) for r in range(tl.n) if int(tl.span_id[r]) >= 9001}
    assert list(root.values()).count(-1) == 1 and root[9001] == -1  # the earliest start of the cycle


def test_from_parts_equals_from_unsorted_of_the_joined_columns():
    # from_parts joins the parts itself (a reader's chunks, the parallel read's ranges); the Timeline must be the
    # one from_unsorted builds from the joined columns (attrs keyed across the parts, a column missing from one
    # part is -1 there, consume=True takes the parts apart).
    from gputrace.timeline.model import COLUMNS

    rng = np.random.default_rng(5)
    lanes = [Lane("h", 1, d, f"stream:{s}") for d in (1, 0, -1) for s in (2, 0)]
    parts = []
    for m in (0, 37, 1, 200):
        ids = rng.integers(1, 60, m).astype(np.uint64)
        parts.append({
            "start": rng.integers(0, 50, m), "end": rng.integers(50, 60, m),
            "lane": rng.integers(0, len(lanes), m).astype(np.int32), "phase": rng.integers(0, 3, m).astype(np.int32),
            "trace": rng.integers(0, 2, m).astype(np.int32), "span_id": ids,
            "parent_span_id": np.where(rng.random(m) < 0.3, 0, rng.integers(1, 60, m)).astype(np.uint64),
        })
    parts[3]["batch"] = rng.integers(0, 9, 200).astype(np.int32)  # only in the last part
    attrs = {5: {"a": 1}, 37: {"b": 2}, 38: {"c": 3}, 237: {"d": 4}}
    names = {0: "n0", 100: "n100"}
    joined = {k: np.concatenate([p[k] if k in p else np.full(len(p["start"]), -1, dtype=COLUMNS[k]) for p in parts])
              for k in parts[3]}
    want = Timeline.from_unsorted(joined, ["p0", "p1", "p2"], lanes, [], ["t0", "t1"], attrs, names)
    given = [dict(p) for p in parts]
    got = Timeline.from_parts(given, ["p0", "p1", "p2"], lanes, [], ["t0", "t1"], attrs, names, consume=True)
    assert sorted(got.cols) == sorted(want.cols) == sorted(COLUMNS)
    for k in COLUMNS:
        assert got.cols[k].dtype == want.cols[k].dtype and np.array_equal(got.cols[k], want.cols[k]), k
    assert got.attrs == want.attrs and got.names == want.names and got.lanes == want.lanes
    assert got.lane_offsets.tolist() == want.lane_offsets.tolist()
    assert (got.cols["batch"] >= 0).sum() == 200  # the first parts' rows have no batch
    assert all(not p for p in given)  # consumed
    assert list(got.cols) == list(COLUMNS)
    empty = Timeline.from_parts([], [], [])
    assert empty.n == 0 and sorted(empty.cols) == sorted(COLUMNS)


def _reference_parents(tl: Timeline) -> list[int]:
    # The contract, walked by hand on the sorted rows: the first sorted row with the parent id and the same trace;
    # a row whose first such row is itself is a root; then cycles broken (break_parent_cycles, tested above).
    from gputrace.timeline._rows import break_parent_cycles

    first: dict[tuple[int, int], int] = {}
    for r in range(tl.n):
        first.setdefault((int(tl.trace[r]), int(tl.span_id[r])), r)
    out = []
    for r in range(tl.n):
        pid = int(tl.parent_span_id[r])
        p = first.get((int(tl.trace[r]), pid), -1) if pid else -1
        out.append(-1 if p == r else p)
    parent = np.array(out, dtype=np.int64)
    break_parent_cycles(parent, tl.start)
    return parent.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parent_links_found_before_the_sort_follow_the_sorted_rows(seed):
    # The links are found on the rows as read and mapped to the sorted rows; where ids clash, the row first in
    # the sorted Timeline wins, whatever order the rows were read in.
    rng = np.random.default_rng(seed)
    n = 3000
    ids = rng.integers(1, 400, n).astype(np.uint64)  # many clashes, within and across traces
    cols = {
        "start": rng.integers(0, 200, n), "end": rng.integers(200, 260, n),
        "lane": rng.integers(0, 3, n).astype(np.int32), "phase": np.zeros(n, np.int32),
        "trace": rng.integers(0, 3, n).astype(np.int32), "span_id": ids,
        "parent_span_id": np.where(rng.random(n) < 0.2, 0, np.where(rng.random(n) < 0.05, ids,
                                                                    rng.integers(1, 450, n))).astype(np.uint64),
    }
    lanes = [Lane("h", 1, 0, f"stream:{s}") for s in (2, 0, 1)]
    tl = Timeline.from_unsorted(dict(cols), ["p"], lanes, [], ["t0", "t1", "t2"])
    assert tl.parent.tolist() == _reference_parents(tl)
    for r in range(tl.n):  # depths of the plain walk (cycles broken)
        p, d = int(tl.parent[r]), 0
        while p >= 0:
            d, p = d + 1, int(tl.parent[p])
        assert tl.depth[r] == d
    rev = {k: v[::-1].copy() for k, v in cols.items()}  # the same rows read in another order
    again = Timeline.from_unsorted(rev, ["p"], lanes, [], ["t0", "t1", "t2"])
    assert again.parent.tolist() == _reference_parents(again)
