"""What mapping a PyTorch-profiler (Kineto) trace onto the GPU-activity conventions adds to reading it.

Reads a synthetic Kineto trace (``bench_chrome_foreign.write_kineto``: kernels, runtime calls, operators and
annotations in equal parts) with the Chrome reader, then runs ``timeline.formats.chrome.kineto.map_kineto``
on the result, in alternating rounds; prints the medians and the ratio map / read (one run, so machine
load cancels out). Usage: ``python benchmarks/bench_kineto_map.py [--events N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_chrome_foreign import write_kineto  # noqa: E402 (the benchmark folder is not a package)

import gputrace.timeline.formats.chrome.events as chrome_events  # noqa: E402
import gputrace.timeline.formats.chrome.read as chrome_read  # noqa: E402
from gputrace.timeline.formats.chrome.kineto import map_kineto  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "kineto.json"
        write_kineto(p, a.events, False)
        chrome_events.map_kineto = lambda tl, head: tl  # the plain read (the accumulator's), without the mapping
        reads, maps = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            tl = chrome_read.read_chrome(p)
            t1 = time.perf_counter()
            map_kineto(tl, {})
            maps.append(time.perf_counter() - t1)
            reads.append(t1 - t0)
    r, m = statistics.median(reads), statistics.median(maps)
    print(f"{a.events:,} events: read {r:.3f} s, map_kineto {m:.3f} s (median of {a.repeats}); map/read {m / r:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
