"""Host multi-scalar multiplication split over threads (the pipeline's ``b_g2``, the CPU backend's ``msm_g1``).

py_arkworks' ``multiexp_unchecked`` runs on one core and releases the GIL: two concurrent calls take
the time of one (measured on the 2-core box, docs/prover.md). So an MSM of n points cut into k
contiguous parts, each a ``multiexp_unchecked`` on its own pool thread, runs up to k times faster; the
k partial sums are added on the calling thread. Parts are at least ``MIN_PART`` points so the fixed
cost of a call stays small against its work.

Bases are read once, on the calling thread (``bases[:n]``), and the parts slice that list. A key query
can be a lazily decoded ``fixed_base.PointRows``: when every part thread read it, each one saw it not yet
decoded and decoded all of it, under the GIL, one after another (k parts: up to k decodes of the whole query;
docs/prover.md "The host path at 2^20").

Threads: ``multiexp`` may be called from several threads at once (parts of different MSMs share
the pool's queue); it must not be called from one of this pool's own threads (it waits for parts).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np

from .field import limbs_to_scalars

MIN_PART = 4096


def cpu_threads() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count()`` where that is missing)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


class HostMsm:
    """A pool of ``threads`` threads for split multiexps; ``close()`` joins it (idempotent)."""

    def __init__(self, threads: int, thread_name_prefix: str = "host-msm") -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=thread_name_prefix)
        self._closed = False

    def parts_for(self, n: int) -> int:
        """How many parts an MSM of ``n`` points is cut into."""
        return max(1, min(self.threads, n // MIN_PART))

    def multiexp(self, point_type: Any, bases: Sequence[Any], limbs: np.ndarray) -> Any:
        """``sum(limbs[i] * bases[i])`` for the first ``len(limbs)`` bases; ``point_type`` is ``G1Point`` or
        ``G2Point``. Raises ValueError if there are more scalars than bases, RuntimeError after ``close()``."""
        if self._closed:
            raise RuntimeError("HostMsm.multiexp after close()")
        limbs = np.ascontiguousarray(limbs, dtype=np.uint64).reshape(-1, 4)
        n = len(limbs)
        if n > len(bases):
            raise ValueError(f"{n} scalars for {len(bases)} bases")
        if n == 0:
            return point_type.identity()
        k = self.parts_for(n)
        points = bases[:n]  # one read (a lazy key query decodes here, once); the parts slice this list
        # Scalars are made once, here: the conversion holds the GIL (about 0.5 us per scalar), so doing it in
        # every part thread gains nothing and makes k GIL holders, and each one lengthens every GIL take-back
        # of other threads (a GPU worker's launches and syncs) by up to a switch interval
        # (benchmarks/bench_gil_convoy.py: 5.3 ms per call with one converting thread, 26 ms with four).
        scalars = limbs_to_scalars(limbs)
        if k == 1:
            return point_type.multiexp_unchecked(points, scalars)
        cuts = np.linspace(0, n, k + 1).astype(int).tolist()
        futures = [self._pool.submit(_part, point_type, points, scalars, lo, hi) for lo, hi in pairwise(cuts)]
        acc = point_type.identity()
        for f in futures:
            acc = acc + f.result()
        return acc

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)


def _part(point_type: Any, points: Sequence[Any], scalars: Sequence[Any], lo: int, hi: int) -> Any:
    return point_type.multiexp_unchecked(points[lo:hi], scalars[lo:hi])
