"""union_by_group (analysis/_common.py): the per-group interval union every busy/idle figure rests on, checked
against a plain-Python merge, including traces whose times are too far apart for the offset trick."""

from __future__ import annotations

import numpy as np
import pytest

from gputrace.analysis._common import union_by_group


def _reference(g, s, e):
    out = []
    for grp in sorted(set(g)):
        iv = sorted((a, max(a, b)) for k, a, b in zip(g, s, e, strict=True) if k == grp)
        cs, ce = iv[0]
        for a, b in iv[1:]:
            if a > ce:
                out.append((grp, cs, ce))
                cs, ce = a, b
            else:
                ce = max(ce, b)
        out.append((grp, cs, ce))
    return out


def _as_rows(r):
    return list(zip(*(x.tolist() for x in r), strict=True))


@pytest.mark.parametrize("scale", [1, 10**6, 2**40, 2**58])
def test_union_matches_a_plain_merge_at_every_time_scale(scale):
    rng = np.random.default_rng(scale % 1000)
    n = 400
    g = rng.integers(0, 37, n)
    s = rng.integers(0, 1000, n) * scale
    e = s + rng.integers(0, 60, n) * scale
    assert _as_rows(union_by_group(g, s, e)) == _reference(g.tolist(), s.tolist(), e.tolist())


def test_a_trace_spanning_more_than_2_62_ns_merges_without_recursing():
    # One group whose own span is beyond 2**62 ns: the offset trick cannot apply even to one group.
    g = [0, 0, 0, 1, 1]
    s = [0, 5, 2**62 + 5, -(2**62), 2**62]
    e = [10, 20, 2**62 + 20, 2**62 + 1, 2**63 - 1]
    assert _as_rows(union_by_group(np.array(g), np.array(s), np.array(e))) == _reference(g, s, e)


def test_report_of_a_trace_spanning_more_than_2_62_ns(tmp_path):
    from gputrace.analysis.report import analyse_timeline
    from gputrace.testing.synth import make_timeline

    big = 2**62
    tl = make_timeline([
        {"id": "p", "name": "prove", "start": 0, "end": big + 100},
        {"name": "synthesis", "start": 1, "end": big, "parent": "p"},
        {"name": "msm_h", "start": 10, "end": 20, "device": 0, "kind": "gpu", "parent": "p"},
        {"name": "msm_h", "start": big + 10, "end": big + 50, "device": 0, "kind": "gpu", "parent": "p"},
    ])
    a = analyse_timeline(tl)
    (dev,) = a.devices
    assert (dev.busy_ns, dev.idle_ns) == (50, big + 100 - 50)  # busy 10 + 40 ns of the whole wall


def test_paths_of_a_long_chain_are_built_once_each():
    """Timeline.paths (unattributed time per path) equals Timeline.path row by row on a 1,000-span chain, where
    path keeps the row and 256 ancestors (issue 34: 256 Python steps per row made a 300k chain take 45 s)."""
    from gputrace.testing.synth import make_timeline

    n = 1000
    tl = make_timeline([{"id": i, "name": f"f{i % 7}", "start": i, "end": 2 * n - i, "parent": i - 1 if i else None}
                        for i in range(n)])
    rows = list(range(tl.n))
    assert tl.paths(rows) == [tl.path(r) for r in rows]
    assert len(tl.paths([rows[-1]])[0].split("/")) == 257
