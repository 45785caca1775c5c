"""TimelineIndex levels, the lane tree, the query language, batched loading and file errors."""

import gzip
import os

import numpy as np
import pytest

from gputrace.testing.synth import make_timeline
from gputrace.timeline.model import Timeline
from gputrace.tui.index import TimelineIndex
from gputrace.tui.loader import LoadError, Part, batch_updates
from gputrace.tui.query import QueryError, match_mask, parse_duration
from gputrace.tui.rows import DEVICE, GPU, HOST, LANE, build_rows
from gputrace.tui.sources import trace_parts

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
SAMPLE = os.path.join(DATA, "sample_2gpu.jsonl")


def small_tl() -> Timeline:
    spans = [
        {"id": "p", "name": "prove", "start": 0, "end": 100},
        {"id": "s", "name": "synthesis", "start": 0, "end": 40, "parent": "p"},
        {"id": "pin", "name": "pin", "start": 40, "end": 50, "parent": "p", "bytes": 1 << 30},
        {"id": "n", "name": "ntt", "start": 50, "end": 70, "parent": "p", "device": 0, "kind": "gpu",
         "gpu_start": 52, "gpu_end": 69},
        {"name": "intt_abc", "start": 50, "end": 60, "parent": "n", "device": 0, "kind": "gpu"},
        {"name": "coset_ntt", "start": 60, "end": 70, "parent": "n", "device": 0, "kind": "gpu"},
        {"name": "msm_h", "start": 80, "end": 95, "parent": "p", "device": 1, "kind": "gpu",
         "attrs": {"gputrace.msm.window": 13}},
        # Two overlapping spans of one depth on one lane: packed into sublevels.
        {"name": "sync", "start": 72, "end": 90, "parent": "p", "lane": "thread:main"},
        {"name": "sync", "start": 75, "end": 85, "parent": "p", "lane": "thread:main"},
    ]
    return make_timeline(spans)


def test_index_levels_by_depth_and_packing():
    tl = small_tl()
    ix = TimelineIndex.build(tl)
    main = next(k for k, ln in enumerate(tl.lanes) if ln.name == "thread:main")
    levels = ix.lanes[main].levels
    assert [(lv.depth, lv.sublevel) for lv in levels] == [(0, 0), (1, 0), (1, 1)]
    # Each level is sorted and never overlaps itself.
    for lv in levels:
        s, e = lv.index.start, lv.index.end
        assert np.all(s[1:] >= e[:-1])
    gpu0 = next(k for k, ln in enumerate(tl.lanes) if ln.device == 0)
    assert ix.lanes[gpu0].gpu is not None and len(ix.lanes[gpu0].gpu) == 1
    assert ix.t_min == 0 and ix.t_max == 100
    # Every shown row maps to the level that draws it.
    for r in range(tl.n):
        lane, j = ix.level_ids[ix.row_level[r]]
        assert lane == tl.lane[r]
        assert r in ix.lanes[lane].levels[j].index.row


def test_index_mask_hides_rows_and_lanes():
    tl = small_tl()
    mask = match_mask(tl, "device=0")
    ix = TimelineIndex.build(tl, mask=mask)
    shown = [k for k, li in enumerate(ix.lanes) if li.levels]
    assert all(tl.lanes[k].device == 0 for k in shown)
    assert (ix.row_level >= 0).sum() == mask.sum()


def test_rows_tree_and_collapse():
    tl = small_tl()
    ix = TimelineIndex.build(tl)
    rows = build_rows(ix)
    kinds = [r.kind for r in rows]
    assert kinds[0] == HOST
    labels = [r.label.strip() for r in rows if r.kind == DEVICE]
    assert labels == ["▼ GPU 0", "▼ GPU 1", "▼ CPU"]  # GPUs first, then the CPU lanes
    assert GPU in kinds and LANE in kinds
    collapsed = build_rows(ix, {("device", "h", "GPU 0")})
    assert len(collapsed) < len(rows)
    g0 = next(r for r in collapsed if r.key == ("device", "h", "GPU 0"))
    assert g0.collapsed and g0.label.strip().startswith("▶")
    assert [r.kind for r in build_rows(ix, {("host", "h")})] == [HOST]


@pytest.mark.parametrize(
    "query,phases",
    [
        ("msm", {"msm_h"}),
        ("phase=pin,sync", {"pin", "sync"}),
        ("device=1", {"msm_h"}),
        ("device=cpu dur>15", {"prove", "synthesis", "sync"}),
        ("bytes>1000", {"pin"}),
        ("msm.window=13", {"msm_h"}),
        ("kind=gpu NTT", {"ntt", "intt_abc", "coset_ntt"}),
        ("lane=main phase=sync", {"sync"}),
    ],
)
def test_query_language(query, phases):
    tl = small_tl()
    m = match_mask(tl, query)
    assert {tl.phases[p] for p in tl.phase[m]} == phases


def test_query_errors_name_the_term():
    tl = small_tl()
    with pytest.raises(QueryError, match="device=x"):
        match_mask(tl, "device=x")
    with pytest.raises(QueryError, match="kind"):
        match_mask(tl, "kind=warp")
    assert parse_duration("2.5ms") == 2_500_000
    with pytest.raises(QueryError):
        parse_duration("soon")


def test_batch_updates_posts_first_part_then_merges():
    tl = small_tl()
    parts = [Part(tl.select(tl.lane == k)) for k in range(len(tl.lanes))]
    ticks = iter(range(0, 1000, 1))  # a clock that advances 1 s per call: every part is due
    ups = list(batch_updates(parts, batch_time=0.25, clock=lambda: next(ticks) * 0.01))
    assert ups[0].spans == parts[0].timeline.n  # first screen from the first part alone
    assert ups[-1].final and ups[-1].spans == tl.n
    assert all(not u.final for u in ups[:-1])
    # One origin for every update, so the view does not jump between batches.
    assert len({u.index.origin for u in ups}) == 1


def test_batch_updates_follow_posts_the_tail_once_the_source_goes_quiet():
    """A live source whose last parts arrive before the next update is due, then only heartbeats:
    the pending spans must still be posted (the bug: a live view stuck short of the run's end)."""
    tl = small_tl()
    lanes = [tl.select(tl.lane == k) for k in range(len(tl.lanes))]
    now = [0.0]

    def parts():
        yield Part(lanes[0])  # first screen
        now[0] += 0.01
        for p in lanes[1:]:
            yield Part(p)  # a burst: each arrives well before the next update is due
        for _ in range(5):  # the writer stopped: heartbeats only
            now[0] += 0.3
            yield Part(idle=True)

    ups = []
    for u in batch_updates(parts(), batch_time=0.25, final=False, clock=lambda: now[0]):
        ups.append((now[0], u.spans))
    assert ups[0][1] == lanes[0].n
    t_all = next(t for t, n in ups if n == tl.n)  # every span, posted on the first due heartbeat
    assert t_all <= 0.01 + 0.3 + 1e-9


def test_batch_updates_follow_interval_stays_short_while_data_keeps_coming():
    tl = small_tl()
    now = [0.0]

    def parts():
        for _ in range(200):  # a long run writing steadily: a part every 0.1 s for 20 s
            now[0] += 0.1
            yield Part(tl)

    times = [now[0] for _ in batch_updates(parts(), batch_time=0.25, final=False, clock=lambda: now[0])]
    gaps = np.diff(times)
    assert len(times) > 15 and gaps.max() <= 1.0 + 0.1 + 1e-9  # growth stops at FOLLOW_MAX_INTERVAL


def test_batch_updates_snapshot_source_and_cancel():
    tl = small_tl()
    calls = []

    def snap():
        calls.append(1)
        return tl

    parts = [Part(done_bytes=i, total_bytes=10, snapshot=snap) for i in range(1, 4)]
    ups = list(batch_updates(parts, batch_time=100.0))
    assert ups[0].spans == tl.n and ups[-1].final
    assert len(calls) == 2  # first screen + final; nothing in between (not due)
    assert list(batch_updates(parts, cancelled=lambda: True)) == []


def test_trace_parts_reads_sample_in_parts():
    ups = list(batch_updates(trace_parts([SAMPLE], interval=0.0), batch_time=0.0))
    assert ups[-1].final and ups[-1].spans == 120
    assert ups[-1].fraction == 1.0


def test_missing_empty_and_garbage_files(tmp_path):
    with pytest.raises(LoadError, match="no such file"):
        list(trace_parts([str(tmp_path / "nope.jsonl")]))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(LoadError, match="empty file"):
        list(trace_parts([str(empty)]))
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\nthis is not a trace\n")
    with pytest.raises(LoadError, match=r"not an OTLP JSON Lines trace: .*notes.txt:1"):
        list(trace_parts([str(junk)]))


def test_truncated_file_loads_what_it_can_with_a_note(tmp_path):
    data = open(SAMPLE, "rb").read()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 500])  # second line loses its end
    ups = list(batch_updates(trace_parts([str(cut)], interval=0.0)))
    assert 0 < ups[-1].spans < 120
    assert "truncated" in ups[-1].note


def test_gzip_trace(tmp_path):
    gz = tmp_path / "s.jsonl.gz"
    gz.write_bytes(gzip.compress(open(SAMPLE, "rb").read()))
    ups = list(batch_updates(trace_parts([str(gz)])))
    assert ups[-1].spans == 120


def test_first_update_comes_before_the_file_is_read(tmp_path):
    from gputrace.testing.synthetic import write_synthetic

    path = tmp_path / "mid.jsonl"
    write_synthetic(path, target_spans=6000, gpus=2, circuits=4, spans_per_line=64)
    ups = list(batch_updates(trace_parts([str(path)], interval=0.0), batch_time=0.0))
    assert len(ups) >= 2
    assert 0 < ups[0].spans < 6000 and not ups[0].final
    assert ups[0].fraction < 1.0
    assert ups[-1].final and ups[-1].spans == 6000
    assert [u.spans for u in ups] == sorted(u.spans for u in ups)


def test_truncated_file_is_reported_in_the_app(tmp_path):
    import asyncio

    from gputrace.tui.app import GputraceApp

    data = open(SAMPLE, "rb").read()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 500])

    async def go():
        app = GputraceApp([str(cut)])
        async with app.run_test(size=(120, 30)) as pilot:
            await app.wait_ready(30)
            await pilot.pause()
            assert app.error is None and 0 < app.index.timeline.n < 120
            assert any("truncated" in n.message for n in app._notifications)
            assert "truncated" in app.query_one("#status").text

    asyncio.run(go())


def test_pure_modules_do_not_import_textual():
    import subprocess
    import sys

    mods = "layout index render rows query loader overlays sources".split()
    code = "import sys\n" + "".join(f"import gputrace.tui.{m}\n" for m in mods) + "print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_chrome_trace_opens_too(tmp_path):
    from gputrace.timeline.formats.chrome.export import write_chrome
    from gputrace.timeline import read_trace

    path = tmp_path / "trace.json"
    write_chrome(read_trace(SAMPLE), path)
    ups = list(batch_updates(trace_parts([str(path)])))
    assert ups[-1].final and ups[-1].spans == 120
    tl = ups[-1].index.timeline
    assert "msm_h" in tl.phases and any(ln.device == 1 for ln in tl.lanes)
