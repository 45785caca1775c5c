"""Caller cost of a burst of phases and the cyclic GC's share of it, with and without spaced full collections.

Usage: ``python benchmarks/bench_gc_burst.py [-n 300000] [--rounds 2]``. Each case runs in its own process:
``default`` (``configure()``: full collections at most every 1000 generation-1 collections while recording) and
``none`` (``configure(gc_full_every=None)``: the interpreter's thresholds). Prints the caller's thread CPU per
phase and, per generation, the collections and their time per phase (gc callbacks; a collection run by the
exporter thread counts too).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time


def child(mode: str, n: int) -> None:
    import gputrace

    stats = {0: [0, 0], 1: [0, 0], 2: [0, 0]}
    t = [0]

    def cb(phase, info):
        if phase == "start":
            t[0] = time.thread_time_ns()
        else:
            s = stats[info["generation"]]
            s[0] += 1
            s[1] += time.thread_time_ns() - t[0]

    gc.callbacks.append(cb)
    with tempfile.TemporaryDirectory() as tmp:
        kw = {} if mode == "default" else {"gc_full_every": None}
        gputrace.configure(trace_file=os.path.join(tmp, "b.jsonl"), collect_gpu_info=False, buffer_size=1 << 22, **kw)
        phase = gputrace.phase
        t0 = time.thread_time_ns()
        for _ in range(n):
            with phase("ntt", device=0, bytes=1 << 20):
                pass
        dt = (time.thread_time_ns() - t0) / n
        gputrace.shutdown()
    per = ", ".join(f"gen{g}: {c} x, {s / n:.0f} ns" for g, (c, s) in stats.items())
    print(f"{mode:8s} {dt:7.0f} ns per phase (caller thread CPU); GC per phase: {per}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        child(a.child, a.n)
        return 0
    for _ in range(a.rounds):
        for mode in ("none", "default"):
            subprocess.run([sys.executable, __file__, "--child", mode, "-n", str(a.n)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
