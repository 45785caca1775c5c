"""TUI benchmark: a 1,000,000-span synthetic trace in `gputrace view`, headless.

Measures (medians over ``--repeats``, each repeat in a fresh subprocess so peak memory is
per run):

* first screen: seconds from before importing Textual and the viewer until the first frame
  with spans was drawn (target <= 2 s);
* full load: seconds until the final update, as spans/s (target >= 0.5 M/s), next to the
  reference ``read_trace`` on the same file in the same run (ratio = app load / reader);
* redraw: milliseconds to render every visible Gantt row after a zoom or pan step (the
  widget's ``render_line`` over the whole screen, strip cache cold), at several zoom
  levels from fit-all to 1e5x (target <= 50 ms);
* peak RSS of the viewer process (target <= 1 GiB).

Usage::

    .venv/bin/python benchmarks/bench_tui.py [--spans 1000000] [--repeats 3] [--trace PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_trace(spans: int, path: Path) -> Path:
    if path.exists():
        return path
    from gputrace.testing.synthetic import write_synthetic

    tmp = path.with_suffix(".part")
    write_synthetic(tmp, target_spans=spans, gpus=4, circuits=8, streams=2)
    tmp.rename(path)
    return path


def child_app(trace: str, size: tuple[int, int]) -> dict:
    """One viewer run (in a subprocess): first screen, full load, redraw timings, peak RSS."""
    t_start = time.perf_counter()
    from gputrace.tui.app import GputraceApp
    from gputrace.tui.gantt import Gantt

    app = GputraceApp([trace])
    out: dict = {}

    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await asyncio.wait_for(app.loaded.wait(), 600)
            out["load_s"] = time.perf_counter() - t_start
            await app.wait_ready(600)  # analysis done: nothing else competes for the CPU
            out["ready_s"] = time.perf_counter() - t_start
            await pilot.pause()
            gantt = app.query_one(Gantt)
            h = gantt.size.height
            tl = app.index.timeline
            samples = {}
            # Zoom levels: fit, then zoom in around the middle of the data; at each level one
            # zoom step and pans left and right, each timed with a cold strip cache.
            gantt.action_fit()
            for level, factor in (("fit", 1), ("10x", 10), ("1000x", 1000), ("1e5x", 100000)):
                gantt.action_fit()
                if factor > 1:
                    gantt.set_view(gantt.view.zoom(factor, gantt._anchor()))
                times, cpu = [], []
                for op in ("zoom_in", "zoom_out", "pan_right", "pan_left", "pan_right", "zoom_in", "zoom_out"):
                    if op == "zoom_in":
                        gantt.action_zoom(2)
                    elif op == "zoom_out":
                        gantt.action_zoom(0.5)
                    elif op == "pan_right":
                        gantt.action_pan(0.5)
                    else:
                        gantt.action_pan(-0.5)
                    t, c = time.perf_counter(), time.process_time()
                    for y in range(h):
                        gantt.render_line(y)
                    times.append((time.perf_counter() - t) * 1e3)
                    cpu.append((time.process_time() - c) * 1e3)
                samples[level] = statistics.median(times)
                samples[level + "_cpu"] = statistics.median(cpu)
                samples[level + "_max"] = max(times)
            # End to end through Textual: key press -> next frame.
            e2e = []
            for key in ("plus", "minus", "l", "h") * 3:
                t = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                e2e.append((time.perf_counter() - t) * 1e3)
            out["redraw_ms"] = samples
            out["keypress_ms"] = statistics.median(e2e)
            out["spans"] = tl.n
            out["rows_on_screen"] = h

    asyncio.run(go())
    out["keypress_ref_ms"] = _reference_keypress(size)
    # From before importing Textual and the viewer (interpreter start-up itself not included).
    out["first_screen_s"] = (app._t_start - t_start) + app.first_draw_s
    out["first_screen_app_s"] = app.first_draw_s
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _reference_keypress(size: tuple[int, int]) -> float:
    """Pilot key press -> frame on a trivial Textual app (one Static that changes text):
    the harness's own cost, to read the viewer's figure against."""
    from textual.app import App
    from textual.widgets import Static

    class Ref(App):
        BINDINGS = [("plus", "bump")]
        n = 0

        def compose(self):
            yield Static("0", id="s")

        def action_bump(self) -> None:
            self.n += 1
            self.query_one("#s", Static).update(str(self.n))

    times = []

    async def go() -> None:
        app = Ref()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            for _ in range(12):
                t = time.perf_counter()
                await pilot.press("plus")
                await pilot.pause()
                times.append((time.perf_counter() - t) * 1e3)

    asyncio.run(go())
    return statistics.median(times)


def child_reader(trace: str) -> dict:
    t = time.perf_counter()
    from gputrace.timeline.load import read_as, sniff

    tl = read_as(trace, sniff(trace))  # read_trace for OTLP JSONL; the Nsight/Chrome reader for those
    return {"read_s": time.perf_counter() - t, "spans": tl.n,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_child(kind: str, trace: str, size: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--trace", trace, "--size", size],
        capture_output=True, text=True, cwd=ROOT, timeout=1800,
    )
    if out.returncode != 0:
        raise SystemExit(f"child {kind} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trace", help="use this trace file instead of generating one")
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--child", choices=["app", "reader"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    if args.child == "app":
        print(json.dumps(child_app(args.trace, size)))
        return
    if args.child == "reader":
        print(json.dumps(child_reader(args.trace)))
        return

    trace = Path(args.trace) if args.trace else make_trace(
        args.spans, Path(tempfile.gettempdir()) / f"gputrace_bench_tui_{args.spans}.jsonl")
    mb = os.path.getsize(trace) / 1e6
    print(f"trace: {trace} ({mb:.0f} MB), screen {args.size}, {args.repeats} repeats, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    apps, readers = [], []
    for i in range(args.repeats):
        readers.append(run_child("reader", str(trace), args.size))
        apps.append(run_child("app", str(trace), args.size))
        a = apps[-1]
        print(f"  repeat {i + 1}: first screen {a['first_screen_s']:.2f} s, load {a['load_s']:.1f} s, "
              f"reader {readers[-1]['read_s']:.1f} s, peak {a['peak_rss_mib']:.0f} MiB")
    med = statistics.median
    spans = apps[0]["spans"]
    first = med(a["first_screen_s"] for a in apps)
    load = med(a["load_s"] for a in apps)
    read = med(r["read_s"] for r in readers)
    peak = med(a["peak_rss_mib"] for a in apps)
    levels = [k for k in apps[0]["redraw_ms"] if not k.endswith(("_max", "_cpu"))]
    rows = [
        ("first drawn screen", f"{first:.2f} s", "<= 2 s", first <= 2.0),
        ("  of which after App()", f"{med(a['first_screen_app_s'] for a in apps):.2f} s", "", None),
        ("full load", f"{spans / load / 1e6:.2f} M spans/s ({load:.1f} s)", ">= 0.5 M spans/s", spans / load >= 5e5),
        ("  reference: read_trace alone", f"{spans / read / 1e6:.2f} M spans/s ({read:.1f} s)", "", None),
        ("  app load / read_trace", f"{load / read:.2f}x", "", None),
    ]
    for lv in levels:
        ms = med(a["redraw_ms"][lv] for a in apps)
        mx = max(a["redraw_ms"][lv + "_max"] for a in apps)
        cp = med(a["redraw_ms"][lv + "_cpu"] for a in apps)
        rows.append((f"redraw after zoom/pan ({lv})", f"{ms:.1f} ms (max {mx:.1f}, cpu {cp:.1f})", "<= 50 ms", ms <= 50))
    kp = med(a["keypress_ms"] for a in apps)
    rows.append(("key press -> frame (Pilot)", f"{kp:.1f} ms", "", None))
    kr = med(a["keypress_ref_ms"] for a in apps)
    rows.append(("  reference: trivial Textual app", f"{kr:.1f} ms", "", None))
    rows.append(("loaded + analysed", f"{med(a['ready_s'] for a in apps):.1f} s", "", None))
    rows.append(("peak memory (viewer)", f"{peak:.0f} MiB", "<= 1024 MiB", peak <= 1024))
    rows.append(("  reference: read_trace peak", f"{med(r['peak_rss_mib'] for r in readers):.0f} MiB", "", None))
    w = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{w}}  {'value':<34} {'target':<18} ok")
    for name, val, target, ok in rows:
        print(f"{name:<{w}}  {val:<34} {target:<18} {'' if ok is None else ('yes' if ok else 'NO')}")
    print(f"\n{spans:,} spans, {apps[0]['rows_on_screen']} Gantt rows on screen")


if __name__ == "__main__":
    main()
