"""Timeline.concat of files without trace ids (other tools' traces, whose span ids the reader numbers 1, 2, ... per
file): a row links only to rows of its own file, so two rank files read together never share parents; rows with a
trace id still link across parts (one trace split over files)."""

from __future__ import annotations

import numpy as np

from gputrace.timeline.model import Lane, Timeline


def _part(host: str, trace: int, ids=(1, 2, 3), parents=(0, 1, 1), t0: int = 0) -> Timeline:
    n = len(ids)
    cols = {"start": np.arange(n, dtype=np.int64) + t0, "end": np.full(n, 10 + t0, np.int64),
            "phase": np.arange(n, dtype=np.int32), "lane": np.zeros(n, np.int32), "resource": np.zeros(n, np.int32),
            "trace": np.full(n, trace, np.int32), "span_id": np.asarray(ids, np.uint64),
            "parent_span_id": np.asarray(parents, np.uint64)}
    return Timeline.from_unsorted(cols, [f"{host}.{i}" for i in range(n)], [Lane(host, 1, -1, "thread:main")],
                                  [{"host.name": host}], ["ab" * 16] if trace >= 0 else [])


def test_trace_less_parts_link_only_inside_themselves():
    tl = Timeline.concat([_part("a", -1), _part("b", -1, t0=5)])
    par, res = tl.cols["parent"], tl.cols["resource"]
    assert int((par >= 0).sum()) == 4 and (res[par[par >= 0]] == res[par >= 0]).all()
    for r in np.flatnonzero(par >= 0).tolist():  # each child's parent is the root of its own file
        assert tl.name_of(int(par[r])).split(".")[0] == tl.name_of(r).split(".")[0]


def test_a_trace_split_over_parts_still_links_across():
    one = _part("a", 0, ids=(1,), parents=(0,))
    two = _part("a", 0, ids=(2, 3), parents=(1, 1))
    tl = Timeline.concat([one, two])
    assert int((tl.cols["parent"] >= 0).sum()) == 2
