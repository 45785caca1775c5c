"""``assert_same_timeline``: two Timelines equal column for column (dtypes included), with the same tables."""

from __future__ import annotations

import numpy as np


def assert_same_timeline(a, b) -> None:
    assert a.n == b.n and a.phases == b.phases and a.lanes == b.lanes
    assert a.cols.keys() == b.cols.keys()
    for k in a.cols:
        assert a.cols[k].dtype == b.cols[k].dtype and np.array_equal(a.cols[k], b.cols[k]), k
    assert np.array_equal(a.lane_offsets, b.lane_offsets)
    assert a.attrs == b.attrs and a.names == b.names and a.trace_ids == b.trace_ids and a.resources == b.resources
