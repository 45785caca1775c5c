"""``gputrace report`` on a trace of many distinct span names (one phase per span): time and peak memory.

    .venv/bin/python benchmarks/bench_report_names.py [--names 1000000] [--repeats 3] [--file] [--flat] [--only-file]

Builds a Timeline column-wise (``--names`` host spans back to back, each its own name, under one
``prove`` root; ``--flat``: no root), then times the report's three steps, each the median of
``--repeats``: the analysis (``analyse_timeline``), the ``--json`` document (``to_dict``) and the
rendered tables (``render`` to a 160-column console into a buffer), against a reference taken in the
same run (``np.sort`` of the durations). Peak RSS is the process's high-water mark after all steps.
``--file`` also writes the trace as OTLP JSON lines and runs ``gputrace report FILE`` once in a
subprocess (wall time and the child's own peak RSS): the whole command as a user runs it, reading
included.
"""

from __future__ import annotations

import argparse
import io
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gputrace.timeline.model import Lane, Timeline


def build(n: int, seed: int = 0, flat: bool = False) -> Timeline:
    """``n`` spans back to back, each its own name, under one ``prove`` root (``flat``: no root, no parents)."""
    rng = np.random.default_rng(seed)
    dur = rng.integers(1_000, 50_000, size=n).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(dur + 100)[:-1]]) + 1_700_000_000_000_000_000
    end = start + dur
    if flat:
        z = np.zeros(n, np.int32)
        cols = dict(start=start, end=end, gpu_start=np.full(n, -1, np.int64), gpu_end=np.full(n, -1, np.int64),
                    phase=np.arange(n, dtype=np.int32), lane=z.copy(), device=np.full(n, -1, np.int16),
                    kind=np.zeros(n, np.int8), nbytes=np.full(n, -1, np.int64),
                    span_id=np.arange(1, n + 1, dtype=np.uint64), parent_span_id=np.zeros(n, np.uint64),
                    resource=z.copy(), trace=z.copy(), circuit=np.full(n, -1, np.int32),
                    batch=np.full(n, -1, np.int32))
        return Timeline.from_unsorted(cols, [f"op_{i:07d}" for i in range(n)], [Lane("h", 1, -1, "thread:main")],
                                      [{"gputrace.run_id": "bench"}], ["ab" * 16])
    t0, t1 = int(start[0]) - 10, int(end[-1]) + 10
    start = np.concatenate([[t0], start])
    end = np.concatenate([[t1], end])
    m = n + 1
    span_id = np.arange(1, m + 1, dtype=np.uint64)
    parent = np.ones(m, np.uint64)
    parent[0] = 0
    phases = ["prove"] + [f"op_{i:07d}" for i in range(n)]
    z = np.zeros(m, np.int32)
    cols = dict(start=start, end=end, gpu_start=np.full(m, -1, np.int64), gpu_end=np.full(m, -1, np.int64),
                phase=np.arange(m, dtype=np.int32), lane=z.copy(), device=np.full(m, -1, np.int16),
                kind=np.zeros(m, np.int8), nbytes=np.full(m, -1, np.int64), span_id=span_id, parent_span_id=parent,
                resource=z.copy(), trace=z.copy(), circuit=np.full(m, -1, np.int32), batch=np.full(m, -1, np.int32))
    return Timeline.from_unsorted(cols, phases, [Lane("h", 1, -1, "thread:main")], [{"gputrace.run_id": "bench"}],
                                  ["ab" * 16])


def timed(fn, repeats: int) -> tuple[float, object]:
    ts, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--file", action="store_true", help="also run the report command on an OTLP file")
    ap.add_argument("--flat", action="store_true", help="no prove root: every span a root of its own")
    ap.add_argument("--only-file", action="store_true", help="only the command on the file (no in-process steps)")
    a = ap.parse_args()
    from gputrace.analysis.report import analyse_timeline
    from gputrace.commands.report import render
    from gputrace.textsafe import console

    t = time.perf_counter()
    tl = build(a.names, flat=a.flat)
    print(f"built {tl.n:,} spans, {len(tl.phases):,} names in {time.perf_counter() - t:.2f} s")
    if a.only_file:
        return run_file(tl)
    ref, _ = timed(lambda: np.sort(tl.duration()), a.repeats)
    res_t, res = timed(lambda: analyse_timeline(tl), a.repeats)
    doc_t, doc = timed(lambda: res.to_dict(), a.repeats)

    def draw() -> int:
        buf = io.StringIO()
        render(doc, console(file=buf, width=160))
        return len(buf.getvalue())

    draw_t, chars = timed(draw, a.repeats)
    print(f"{'step':28s} {'median s':>10s} {'x reference':>12s}")
    for name, s in (("np.sort(durations) [ref]", ref), ("analyse_timeline", res_t), ("to_dict (--json)", doc_t),
                    ("render (tables)", draw_t)):
        print(f"{name:28s} {s:10.3f} {s / ref:12.1f}")
    print(f"phase rows in --json: {len(doc['phases']):,}; rendered text: {chars:,} characters")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")
    if a.file:
        run_file(tl)


def run_file(tl: Timeline) -> None:
    """Write ``tl`` as OTLP JSON lines and time ``gputrace report`` on it in a child process."""
    try:
        from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
    except ImportError:  # the layout before the format folders (to measure an older checkout)
        from gputrace.interop.otlp_file import write_otlp_jsonl  # type: ignore[no-redef]

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "names.jsonl"
        write_otlp_jsonl(tl, path)
        # The child reports its own high-water mark, VmHWM (ru_maxrss would count this process's pages:
        # Linux carries the forked copy's peak across exec).
        code = ("import sys; from gputrace.cli import main; rc = main(['report', sys.argv[1]]); "
                "hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0]; "
                "print(f'@maxrss {hwm}', file=sys.stderr); sys.exit(rc)")
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
        wall = time.perf_counter() - t
        rss = next((int(ln.split()[1]) / 1024 for ln in r.stderr.splitlines() if ln.startswith("@maxrss")), -1)
        print(f"gputrace report FILE ({path.stat().st_size / 1e6:,.0f} MB): exit {r.returncode}, {wall:.1f} s, "
              f"child peak RSS {rss:,.0f} MiB, {len(r.stdout):,} characters out")
        if r.returncode:
            print(r.stderr[-2000:])


if __name__ == "__main__":
    main()
