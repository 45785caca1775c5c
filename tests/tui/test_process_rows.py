"""The process level of the lane tree (issue 35): a host with lanes of several processes (what ``record``
writes for a launch, a torchrun job) shows host > process (rank) > GPU > stream, one header per process
naming its rank and pid first, so six processes' ``thread:MainThread`` lanes are told apart at 80 columns."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gputrace.testing.synth import make_timeline
from gputrace.timeline import read_any
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.tui.gantt_navigation import fold_key
from gputrace.tui.gantt_strip import NAME_W
from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import fit_parts
from gputrace.tui.rows import DEVICE, HOST, LANE, PROCESS, build_rows, device_key, groups_of

ROOT = Path(__file__).resolve().parents[2]
PIDS = (4105, 4101, 4103, 4100, 4104, 4102)  # rank r is PIDS[r]: neither pid order nor file order is rank order


def _six_ranks():
    """Six processes on host ``node``, each a ``thread:MainThread`` lane with a ``step`` and, ranks 0-1, a
    GPU stream: the shape of a 6-process ``record`` (resources carry pid, rank and command)."""
    resources = [{"host.name": "node", "process.pid": pid, "gputrace.rank": r, "service.name": "python train.py"}
                 for r, pid in enumerate(PIDS)]
    spans = []
    for r, pid in enumerate(PIDS):
        base = dict(host="node", pid=pid, resource=r)
        spans.append(dict(base, id=f"s{r}", name="step", start=1000 * r, end=1000 * r + 5000,
                          lane="thread:MainThread"))
        if r < 2:
            spans.append(dict(base, name="k", start=1000 * r + 10, end=1000 * r + 900, device=r, lane="stream:7",
                              kind="gpu", parent=f"s{r}"))
    return make_timeline(spans, resources=resources, trace_id="0123456789abcdef0123456789abcdef")


def test_each_process_gets_a_header_naming_rank_and_pid_in_rank_order():
    tl = _six_ranks()
    rows = build_rows(TimelineIndex.build(tl))
    procs = [r for r in rows if r.kind == PROCESS]
    assert [r.parts[:2] for r in procs] == [(f"rank {r}", f"pid {pid}") for r, pid in enumerate(PIDS)]
    assert all(r.parts[2] == "python train.py" for r in procs)
    # each process's lanes come under its header: the MainThread lanes are told apart by the header above
    for p in procs:
        y = rows.index(p)
        end = next((i for i in range(y + 1, len(rows)) if rows[i].kind in (HOST, PROCESS)), len(rows))
        mine = {tl.lanes[r.lane].pid for r in rows[y + 1:end] if r.kind == LANE}
        assert mine == {p.proc}
    # the GPU streams are under their rank's process, in a device group of that process
    gpu0 = next(r for r in rows if r.kind == DEVICE and r.group == ("node", "GPU 0"))
    assert gpu0.proc == PIDS[0] and gpu0.key == device_key("node", "GPU 0", PIDS[0])


def test_folding_a_process_hides_its_lanes_and_locating_a_lane_unfolds_it():
    tl = _six_ranks()
    idx = TimelineIndex.build(tl)
    rows = build_rows(idx)
    p1 = next(r for r in rows if r.kind == PROCESS and r.proc == PIDS[1])
    lane = next(r for r in rows if r.kind == LANE and r.proc == PIDS[1] and r.group[1] == "CPU")
    assert fold_key(lane) == device_key("node", "CPU", PIDS[1])
    folded = build_rows(idx, {p1.key})
    assert not [r for r in folded if r.proc == PIDS[1] and r.kind != PROCESS]
    assert len(folded) < len(rows) and next(r for r in folded if r.key == p1.key).collapsed
    assert p1.key in groups_of(tl, lane.lane) and fold_key(lane) in groups_of(tl, lane.lane)


def test_one_process_has_no_process_level(sample_2gpu):
    rows = build_rows(TimelineIndex.build(read_any([Path(sample_2gpu)])))
    assert rows and not [r for r in rows if r.kind == PROCESS]


@pytest.mark.parametrize("parts, width, want", [
    (("rank 1", "pid 681", "python train.py"), 40, "rank 1 · pid 681 · python train.py"),
    (("rank 1", "pid 681", "python train.py"), 20, "rank 1 · pid 681"),  # no room for 3 chars of the command
    (("pid 647", "python train_step.py"), 20, "pid 647 · python tr…"),
    (("rank 12345", "pid 4242424242"), 12, "rank 12345"),
    (("pid 4242424242",), 8, "pid …242"),
    ((), 10, ""),
])
def test_fit_parts(parts, width, want):
    got = fit_parts(parts, width)
    assert got == want and len(got) <= width


def _screen(path: Path, size: tuple[int, int]) -> list[str]:
    from gputrace.tui.app import GputraceApp
    from gputrace.tui.gantt import Gantt

    async def go():
        app = GputraceApp([str(path)])
        async with app.run_test(size=size) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            g = app.query_one(Gantt)
            return [g.render_line(y).text[:NAME_W - 1].rstrip() for y in range(g.size.height)]

    return asyncio.run(go())


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
def test_six_processes_read_apart_on_screen(tmp_path, size):
    """At 80x24 and 100 columns the name column shows each process's rank and pid above its MainThread lane
    (before: six lanes all reading ``thread:MainThread``)."""
    path = tmp_path / "six.jsonl"
    write_otlp_jsonl(_six_ranks(), path)
    shown = _screen(path, size)
    headers = [ln for ln in shown if ln.startswith(" ▼ rank ")]
    assert headers[:3] == [f" ▼ rank {r} · pid {pid}" for r, pid in enumerate(PIDS[:3])], shown
    assert len(headers) >= 3 and shown.count("   thread:MainThread") >= len(headers) - 1  # (the last may be cut)


def test_the_record_toggle_trace_shows_its_three_processes_at_80x24():
    shown = _screen(ROOT / "tests" / "data" / "foreign" / "train_record_toggle.jsonl.gz", (80, 24))
    assert [ln.split(" · ")[0] for ln in shown if ln.startswith(" ▼ pid")] == [" ▼ pid 647", " ▼ pid 681",
                                                                             " ▼ pid 684"]
    assert " ▼ pid 647 · python tr…" in shown


def test_a_hostile_command_is_plain_text_in_the_process_header():
    """service.name is trace text: control characters made visible, markup left as text."""
    resources = [{"host.name": "h", "process.pid": p, "service.name": "[b]x[/b]\x1b[2J\nevil"} for p in (1, 2)]
    spans = [dict(name="s", start=0, end=10, pid=p, resource=i) for i, p in enumerate((1, 2))]
    rows = build_rows(TimelineIndex.build(make_timeline(spans, resources=resources)))
    parts = [r.parts for r in rows if r.kind == PROCESS]
    assert len(parts) == 2 and all(p[1].startswith("[b]x[/b]") and "\x1b" not in p[1] and "\n" not in p[1]
                                   for p in parts)
