#!/usr/bin/env python3
"""Synthesis of one circuit: whole, in one process, against split into challenge ranges over P processes.

Usage: python3 benchmarks/bench_synthesis.py [--sizes 14,16] [--parts P] [--repeats 3] [--opt a1,a2]

Both run in worker processes of one warmed fork pool (as the pipeline runs them): "whole" is one
``synthesize_witness`` job, "split" is P ``synthesize_part`` jobs plus ``merge_parts`` in this process.
Interleaved (whole, split, whole, split, ...) so load drift hits both alike; prints medians and the ratio
from the same run, with the CPU count and load average; the two witnesses are checked identical.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from gputrace.prover.circuit import shape_for_constraints  # noqa: E402
from gputrace.prover.host_msm import cpu_threads  # noqa: E402
from gputrace.prover.witness import merge_parts, split_challenges, synthesize_part, synthesize_witness  # noqa: E402


def main(argv=None) -> int:
    cpus = cpu_threads()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="14,16")
    ap.add_argument("--parts", type=int, default=cpus)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--opt", default="a1,a2", help="A1/A2 switches for the constraint system ('' for none)")
    a = ap.parse_args(argv)
    opts = frozenset(filter(None, a.opt.split(",")))
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpus} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"parts {a.parts}, opts {sorted(opts) or 'none'}, median of {a.repeats}")
    pool = ProcessPoolExecutor(max_workers=a.parts, mp_context=get_context("fork"))
    try:
        for f in [pool.submit(os.getpid) for _ in range(a.parts)]:
            f.result()
        for logn in (int(s) for s in a.sizes.split(",")):
            shape = shape_for_constraints(1 << logn)
            dom = 1 << logn
            whole_s, split_s = [], []
            for _ in range(a.repeats):
                t = time.perf_counter()
                w = pool.submit(synthesize_witness, shape, 1, 0, dom, opts).result()
                whole_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                jobs = [pool.submit(synthesize_part, shape, 1, 0, opts, lo, hi)
                        for lo, hi in split_challenges(shape.challenges, a.parts)]
                m = merge_parts(shape, 0, dom, [j.result() for j in jobs])
                split_s.append(time.perf_counter() - t)
                if not (np.array_equal(m.abc, w.abc) and np.array_equal(m.z_limbs, w.z_limbs)):
                    raise SystemExit(f"2^{logn}: the merged witness differs from the whole one")
            s1, s2 = statistics.median(whole_s), statistics.median(split_s)
            print(f"2^{logn} ({shape.constraints} constraints, K={shape.challenges}): whole {s1:.2f} s "
                  f"({shape.constraints / s1:,.0f} constraints/s), split into "
                  f"{len(split_challenges(shape.challenges, a.parts))} parts {s2:.2f} s, {s1 / s2:.2f}x")
    finally:
        pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
