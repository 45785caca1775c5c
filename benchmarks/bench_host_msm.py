#!/usr/bin/env python3
"""Host (arkworks) MSM: one ``multiexp_unchecked`` call against ``HostMsm``'s split over one thread per CPU.

Usage: python3 benchmarks/bench_host_msm.py [--sizes 14,16] [--group g2] [--repeats 3]

Interleaved (single, split, single, split, ...) so load drift hits both alike; prints medians and the
ratio measured in the same run, with the CPU count and load average. Bases are 512 distinct points
tiled to the size (the work per point is the same); results are checked equal.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from py_arkworks_bls12381 import G1Point, G2Point, Scalar  # noqa: E402

from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars  # noqa: E402
from gputrace.prover.host_msm import HostMsm, cpu_threads  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="14,16")
    ap.add_argument("--group", choices=("g1", "g2"), default="g2")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    pt = G2Point if a.group == "g2" else G1Point
    cpus = cpu_threads()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpus} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"{a.group.upper()} MSM, median of {a.repeats}")
    msm = HostMsm(cpus)
    rng = random.Random(1)
    try:
        for logn in (int(s) for s in a.sizes.split(",")):
            n = 1 << logn
            tile = [pt() * Scalar(rng.randrange(1, R)) for _ in range(min(n, 512))]
            bases = (tile * (n // len(tile) + 1))[:n]
            limbs = ints_to_limbs([rng.randrange(R) for _ in range(n)])
            one, split = [], []
            for _ in range(a.repeats):
                t = time.perf_counter()
                want = pt.multiexp_unchecked(bases, limbs_to_scalars(limbs))
                one.append(time.perf_counter() - t)
                t = time.perf_counter()
                got = msm.multiexp(pt, bases, limbs)
                split.append(time.perf_counter() - t)
                if got != want:
                    raise SystemExit(f"2^{logn}: split result differs from the single multiexp")
            s1, s2 = statistics.median(one), statistics.median(split)
            print(f"2^{logn}: single {s1:.3f} s, split into {msm.parts_for(n)} parts {s2:.3f} s, {s1 / s2:.2f}x")
    finally:
        msm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
