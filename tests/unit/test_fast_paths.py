"""The faster ways of computing what the viewer and the report show give exactly what the plain ways gave.

Each fast path here replaced a per-row computation (issue 24: `view` of a 1 M-row Nsight export, `report` of a
1 M-event Kineto trace); the plain computation is kept in this file as the reference, and both run on the
committed fixtures (a PyTorch step traced by torch.profiler and by nsys, a 2-rank job, our own traces) and on
random inputs made to hit the corner cases.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from gputrace.analysis.report import analyse_timeline
from gputrace.timeline.load import read_any
from gputrace.tui.layout import format_duration
from gputrace.tui.overlays import IdleLabels, compute_overlays

DATA = Path(__file__).resolve().parents[1] / "data"


def _fixtures(tmp: Path) -> dict[str, object]:
    nsys = tmp / "train_nsys.sqlite"
    with gzip.open(DATA / "foreign" / "train_nsys.sqlite.gz") as f, open(nsys, "wb") as out:
        shutil.copyfileobj(f, out)
    paths = {"kineto": [DATA / "foreign" / "train_kineto.json.gz"], "nsys": [nsys],
             "ranks": [DATA / "foreign" / "dist_rank0.json.gz", DATA / "foreign" / "dist_rank1.json.gz"],
             "kernels": [DATA / "sample_kernels.jsonl"], "2gpu": [DATA / "sample_2gpu.jsonl"],
             "pinning": [DATA / "sample_pinning.jsonl"]}
    return {k: read_any(v) for k, v in paths.items()}


@pytest.fixture(scope="module")
def timelines(tmp_path_factory):
    return _fixtures(tmp_path_factory.mktemp("fast"))


# ---- idle-gap labels: formatted when drawn -------------------------------------------------------------------

def test_idle_labels_equal_the_formatted_list():
    rng = np.random.default_rng(3)
    ns = np.concatenate([[0, 1, 999, 1000, 999_499, 999_500, 10**9, 10**12, 3_600 * 10**9],
                         rng.integers(0, 10**10, 500)])
    lazy = IdleLabels(ns)
    eager = [f"idle {format_duration(x, 2)}" for x in ns.tolist()]
    assert len(lazy) == len(eager)
    assert list(lazy) == eager
    assert lazy[-1] == eager[-1] and lazy[3:9] == eager[3:9] and lazy[::-7] == eager[::-7]
    assert bool(IdleLabels(np.zeros(0, np.int64))) is False and bool(lazy) is True
    with pytest.raises(IndexError):
        lazy[len(eager)]


def test_overlay_gap_labels_match_the_gaps_on_every_fixture(timelines):
    seen = 0
    for name, tl in timelines.items():
        ov = compute_overlays(tl, tl.t0, analyse_timeline(tl, critical=False))
        for key, iv in ov.gaps.items():
            assert isinstance(iv.labels, IdleLabels), name
            assert np.all(np.diff(iv.start) >= 0), (name, key)
            assert list(iv.labels) == [f"idle {format_duration(x, 2)}" for x in (iv.end - iv.start).tolist()]
            seen += len(iv)
    assert seen > 0  # some fixture has idle gaps to label


# ---- one pass over the attributes: activity rows, API calls, profiler rows, phases ------------------------------

def _reference(tl):
    """The per-row passes the scan replaced (activity_index, api_rows, profiler_rows, phase_mask as they were)."""
    from gputrace import activity as A
    from gputrace.analysis.activity_index import _WHAT_CODES

    rows, codes, streams = [], [], []
    for r, a in tl.attrs.items():
        w = a.get(A.ACTIVITY)
        if w is not None:
            c = _WHAT_CODES.get(w)
            if c is not None:
                rows.append(r)
                codes.append(c)
                s = a.get(A.STREAM)
                streams.append(s if isinstance(s, int) else -1)
    r = np.asarray(rows, np.int64)
    o = np.argsort(r, kind="stable")
    api = np.zeros(tl.n, bool)
    api_lanes = [i for i, ln in enumerate(tl.lanes) if ln.name.startswith(A.API_LANE_PREFIX)]
    if api_lanes:
        api |= np.isin(tl.cols["lane"], np.asarray(api_lanes))
    for row, a in tl.attrs.items():
        if a.get(A.ROLE) == "api":
            api[row] = True
    phase = ~api
    for row, a in tl.attrs.items():
        if A.ACTIVITY in a or A.ROLE in a:
            phase[row] = False
    prof = np.asarray([row for row, a in tl.attrs.items() if a.get(A.ROLE) == "profiler"], np.int64)
    if not any(res.get(A.SOURCE) == "kineto" for res in tl.resources):
        prof = np.zeros(0, np.int64)
    return r[o], np.asarray(codes, np.int8)[o], np.asarray(streams, np.int64)[o], api, phase, prof


def _assert_scan_matches(tl, name):
    from gputrace.analysis.activity_index import activity_index
    from gputrace.analysis.api_calls import api_rows, phase_mask, profiler_rows

    rows, what, stream, api, phase, prof = _reference(tl)
    idx = activity_index(tl)
    for got, want in ((idx.rows, rows), (idx.what, what), (idx.stream, stream), (api_rows(tl), api),
                      (phase_mask(tl), phase), (profiler_rows(tl), prof)):
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), name


def test_attribute_scan_matches_the_per_row_passes_on_every_fixture(timelines):
    for name, tl in timelines.items():
        _assert_scan_matches(tl, name)


def test_attribute_scan_matches_on_shared_and_overlaid_attributes():
    """RowAttrs/TemplateAttrs over shared dicts, with overlays that do and do not hold the keys read, plain
    dicts shared and not, odd values (a non-int stream, an unknown activity, a role other than api)."""
    from gputrace import activity as A
    from gputrace.testing.synth import make_timeline
    from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

    rng = np.random.default_rng(11)
    shared = [{A.ACTIVITY: "kernel", A.STREAM: 7, "x": 1}, {A.ACTIVITY: "memcpy", A.STREAM: "7"},
              {A.ROLE: "api"}, {A.ROLE: "profiler"}, {A.ROLE: "op"}, {A.ACTIVITY: "weird"}, {A.ACTIVITY: None},
              {"plain": 1}, {}]
    templates = [{A.ACTIVITY: "kernel", A.STREAM: 0, "c": 0}, {A.ROLE: "", "c": 0}]
    n = 400
    tl = make_timeline([{"name": "k", "start": i * 10, "end": i * 10 + 5} for i in range(n)],
                       resource={A.SOURCE: "kineto"})
    attrs: dict = {}
    for r in range(n):
        k = int(rng.integers(0, 6))
        if k == 0:
            attrs[r] = shared[int(rng.integers(0, len(shared)))]  # a shared plain dict
        elif k == 1:
            attrs[r] = dict(shared[int(rng.integers(0, len(shared)))])  # a dict of its own
        elif k == 2:  # an overlay without the keys read
            attrs[r] = RowAttrs(shared[int(rng.integers(0, len(shared)))], ("c",), (r,))
        elif k == 3:  # an overlay that holds one of them
            key = (A.STREAM, A.ACTIVITY, A.ROLE)[r % 3]
            val = (r, "sync", "api", "profiler")[r % 4]
            attrs[r] = RowAttrs(shared[int(rng.integers(0, len(shared)))], (key,), (val,))
        elif k == 4:
            t = templates[r % 2]
            attrs[r] = TemplateAttrs(t, ("c",), (r,))
        else:
            attrs[r] = TemplateAttrs(templates[0], (A.STREAM, "c"), (r, r))
    tl.attrs = attrs
    _assert_scan_matches(tl, "random")


# ---- the loader: a source read whole is indexed once -----------------------------------------------------------

def test_a_source_read_whole_is_indexed_once(timelines, monkeypatch):
    """One part (a cached trace): the first update is posted at once and the final one is the same index (it
    was built twice before); a part arriving after the first update is still merged into the final one."""
    from gputrace.tui import loader
    from gputrace.tui.index import TimelineIndex

    tl = timelines["nsys"]
    builds = []
    real = TimelineIndex.build.__func__

    def counting(cls, t, **kw):
        builds.append(t.n)
        return real(cls, t, **kw)

    monkeypatch.setattr(TimelineIndex, "build", classmethod(counting))
    ups = list(loader.batch_updates([loader.Part(snapshot=lambda: tl, done_bytes=10, total_bytes=10)]))
    assert [u.final for u in ups] == [False, True] and ups[-1].index is ups[0].index and builds == [tl.n]
    ref = real(TimelineIndex, tl, origin=tl.t0)
    assert ups[-1].index.origin == ref.origin and ups[-1].spans == tl.n
    assert [ln.gpu is None for ln in ups[-1].index.lanes] == [ln.gpu is None for ln in ref.lanes]
    builds.clear()
    other = timelines["kernels"]
    ups = list(loader.batch_updates([loader.Part(tl), loader.Part(other)], batch_time=3600))
    assert ups[-1].final and ups[-1].spans == tl.n + other.n and len(builds) == 2
