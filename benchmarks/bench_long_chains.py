"""Nesting and depth on long parent chains: linear, not quadratic (issue 26).

    python benchmarks/bench_long_chains.py [--sizes 50000,100000,200000] [--repeats 3]

Prints, per size n, the median time (s) of:

* ``depth, chain``: ``Timeline.from_unsorted`` of n rows forming one parent chain (each row the parent of the
  next, rows shuffled), against ``depth, flat``: the same rows with no parents (the reference, same run);
* ``nest, stair``: ``nest_parents`` of n partly overlapping ranges (each starts inside and ends after the one
  before: no range contains another), against ``nest, apart``: n disjoint ranges.

* ``paths, chain``: ``Timeline.paths`` of every row of the chain (the unattributed-time table's phase paths;
  each path keeps the row and 256 ancestors), against ``paths, flat``: of the flat rows.

The ratio chain/flat (stair/apart) stays about constant as n doubles when the work is linear; before the fix it
doubled with n (one pass over all rows per chain level; a stack scanned to its bottom per row).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gputrace.timeline.model import Lane, Timeline
from gputrace.timeline.nesting import nest_parents


def _cols(n: int, chain: bool) -> dict:
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    sid = np.arange(1, n + 1, dtype=np.uint64)
    psid = np.r_[np.uint64(0), sid[:-1]] if chain else np.zeros(n, np.uint64)
    return {"start": np.arange(n, dtype=np.int64)[perm], "end": np.full(n, 10**12, np.int64),
            "lane": np.zeros(n, np.int32), "phase": np.zeros(n, np.int32), "span_id": sid[perm],
            "parent_span_id": psid[perm].astype(np.uint64), "trace": np.zeros(n, np.int32)}


def _timeline(n: int, chain: bool) -> float:
    cols = _cols(n, chain)
    t = time.perf_counter()
    Timeline.from_unsorted(cols, ["x"], [Lane("h", 1, -1, "thread:main")], [{}], [""])
    return time.perf_counter() - t


def _paths(n: int, chain: bool) -> float:
    tl = Timeline.from_unsorted(_cols(n, chain), ["x"], [Lane("h", 1, -1, "thread:main")], [{}], [""])
    t = time.perf_counter()
    tl.paths(np.arange(tl.n))
    return time.perf_counter() - t


def _nest(n: int, stair: bool) -> float:
    start = np.arange(n, dtype=np.int64) * (1 if stair else 10)
    end = start + (10**9 if stair else 5)
    t = time.perf_counter()
    nest_parents(start, end, np.zeros(n, np.int64))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="50000,100000,200000")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(f"{'n':>8} {'depth, chain':>13} {'depth, flat':>12} {'ratio':>6} {'nest, stair':>12} {'nest, apart':>12} "
          f"{'ratio':>6} {'paths, chain':>13} {'paths, flat':>12} {'ratio':>6}")
    for n in (int(x) for x in a.sizes.split(",")):
        rows = {k: [] for k in ("chain", "flat", "stair", "apart", "pchain", "pflat")}
        for _ in range(a.repeats):  # alternating, so a busy moment hits both sides
            rows["chain"].append(_timeline(n, True))
            rows["flat"].append(_timeline(n, False))
            rows["stair"].append(_nest(n, True))
            rows["apart"].append(_nest(n, False))
            rows["pchain"].append(_paths(n, True))
            rows["pflat"].append(_paths(n, False))
        m = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{n:>8} {m['chain']:>13.3f} {m['flat']:>12.3f} {m['chain'] / m['flat']:>6.1f} {m['stair']:>12.3f} "
              f"{m['apart']:>12.3f} {m['stair'] / m['apart']:>6.1f} {m['pchain']:>13.3f} {m['pflat']:>12.3f} "
              f"{m['pchain'] / m['pflat']:>6.1f}")


if __name__ == "__main__":
    main()
