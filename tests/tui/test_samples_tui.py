"""The TUI shows the Python lines the host ran (stack samples): the selected span's process's top sites in the
details panel, and each listed stall's top sites in its detail (pure parts; the panels only render records)."""

from io import StringIO

from rich.console import Console

from gputrace import activity as A
from gputrace.analysis.report import analyse_timeline
from gputrace.testing.synth import make_timeline, sample_span
from gputrace.tui.overlays import compute_overlays
from gputrace.tui.panels import details_table, samples_text

MS = 1_000_000
SLEEP = (("/job/loader.py", 12, "wait_for_input", A.FILE_USER),)
PARKED = (("/usr/lib/python3.11/threading.py", 327, "Condition.wait", A.FILE_STDLIB),)


def _tl():
    spans = [{"name": "python loader.py", "start": 0, "end": 400 * MS, "pid": 5, "kind": "host"}]
    for k in range(4):
        t = k * 100 * MS
        spans.append({"name": "fwd", "start": t, "end": t + 40 * MS, "gpu_start": t, "gpu_end": t + 40 * MS,
                      "device": 0, "kind": "gpu", "pid": 5})
    s = [(t, SLEEP) for k in range(4) for t in range(k * 100 * MS + 45 * MS, k * 100 * MS + 95 * MS, 5 * MS)]
    p = [(t + 1, PARKED) for t in range(0, 400 * MS, 5 * MS)]
    return make_timeline([*spans, sample_span(s, pid=5), sample_span(p, pid=9)], trace_id="cd" * 16)


def _plain(renderable) -> str:
    buf = StringIO()
    Console(file=buf, width=160, color_system=None).print(renderable)
    return buf.getvalue()


def test_details_of_a_span_name_its_process_lines():
    tl = _tl()
    root = next(r for r in range(tl.n) if tl.name_of(r) == "python loader.py")
    out = _plain(details_table(tl, root, 0))
    assert "loader.py:12 in wait_for_input" in out
    assert "Condition.wait" not in out  # pid 9's samples are another process's
    batch = next(r for r in range(tl.n) if tl.name_of(r) == A.SAMPLES_SPAN)
    out = _plain(details_table(tl, batch, 0))
    assert "values]" in out  # a batch's arrays are summarised, not printed


def test_stall_items_carry_their_sites_and_render_them():
    tl = _tl()
    ov = compute_overlays(tl, tl.t0, analyse_timeline(tl, critical=False))
    idle = [it for it in ov.items if it.category == "idle" and it.samples]
    assert idle
    text = samples_text(idle[0].samples).plain
    assert "loader.py:12 in wait_for_input" in text.splitlines()[1]  # first, before the parked thread
    assert "(parked)" in text
    assert samples_text(()).plain == ""
