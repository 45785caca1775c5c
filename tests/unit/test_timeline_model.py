"""Timeline.from_unsorted / concat: parent linking across traces, depth, cycles, attrs remap."""

from __future__ import annotations

import numpy as np

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
