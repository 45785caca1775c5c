"""Chunk layouts of the MSM's bucket sums, sized on the host from bounds (no device-to-host read), for any array
module (numpy or CuPy).

The MSM engine (``backends/cuda_msm.py``) cuts each run of sorted entries (a bucket, or the one run of a batch
addition) into chunks of at most ``S`` entries, sums each chunk on one thread, then sums each run's partial sums
the same way until every run is one point. The chunk counts depend on the bucket sizes, which live on the device;
the engine used to read the total back (``int(cum[-1])``, ``int(per.max())``), one host synchronisation per
level, each leaving the GPU idle while the host issued the next launches. Here every size is an upper bound known
on the host (``chunk_bound``, ``reduce_levels``): the surplus chunks are empty (start = end, summed to the point at
infinity), and a run that is already one point is carried through the remaining levels as a chunk of one.

``xp`` is numpy or cupy (only operations the two share; on CuPy everything is queued on the current stream).
``sum_chunks(pts, cs, ce)`` is the kernel: row i of its result is the sum of ``pts[cs[i]:ce[i]]`` (zero rows, the
point at infinity, for an empty chunk). ``tests/unit/test_msm_layout.py`` checks the layouts against the
host-synchronising ones with integers for points.

Threads: pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def chunk_bound(entries: int, runs: int, S: int) -> int:
    """An upper bound on ``sum(ceil(len_r / S))`` over ``runs`` runs holding ``entries`` entries in all (at most
    ``entries`` entries: a bound is fine): each run adds at most S - 1 to its share, and no chunk is empty."""
    if entries <= 0 or runs <= 0:
        return 0
    return min(entries, (entries + runs * (S - 1)) // S)


def reduce_levels(max_per: int, S: int) -> int:
    """Reduction levels after which a run of at most ``max_per`` partial sums is one point, ``S`` per chunk."""
    levels = 0
    while max_per > 1:
        max_per = -(-max_per // S)
        levels += 1
    return levels


def chunks(xp: Any, starts: Any, ends: Any, S: int, bound: int, even: bool = True) -> tuple[Any, Any, Any, Any]:
    """``(cs, ce, per, cum)``: runs ``[starts, ends)`` (int64) cut into ``per = ceil(len / S)`` chunks each, chunk
    starts/ends ``cs``/``ce`` of length ``bound`` (``chunk_bound``; the chunks past the true total are empty, at 0),
    run r's chunks at ``[cum[r] - per[r], cum[r])``. ``even``: chunk lengths of a run differ by at most one;
    otherwise S long but the last. The layout of the host-synchronising version, padded."""
    length = ends - starts
    per = (length + (S - 1)) // S
    cum = xp.cumsum(per)
    t = xp.arange(bound, dtype=xp.int64)
    owner = xp.searchsorted(cum, t, side="right")
    valid = owner < per.shape[0]  # t < cum[-1], the true number of chunks
    owner = xp.minimum(owner, per.shape[0] - 1)
    k = per[owner]
    j = t - (cum[owner] - k)
    s0 = starts[owner]
    if even:
        L = length[owner]
        k1 = xp.maximum(k, 1)
        cs = s0 + j * L // k1
        ce = s0 + (j + 1) * L // k1
    else:
        cs = s0 + j * S
        ce = xp.minimum(cs + S, ends[owner])
    keep = valid.astype(xp.int64)
    return cs * keep, ce * keep, per, cum


def reduce_runs(xp: Any, sum_chunks: Callable[[Any, Any, Any], Any], pts: Any, per: Any, cum: Any, S: int,
                max_per: int) -> Any:
    """Run r owns ``pts[cum[r] - per[r] : cum[r]]`` (``per[r] <= max_per``, a host bound); returns one row per run,
    the run's sum (zero rows, infinity, for an empty run), after ``reduce_levels(max_per, S)`` calls of
    ``sum_chunks``. ``pts`` (slots, words): the rows past the runs' total are never read."""
    nruns = per.shape[0]
    for _ in range(reduce_levels(max_per, S)):
        slots = pts.shape[0]
        cs, ce, per, cum = chunks(xp, cum - per, cum, S, chunk_bound(slots, nruns, S))
        pts = sum_chunks(pts, cs, ce)
    if pts.shape[0] == 0:
        return xp.zeros((nruns,) + tuple(pts.shape[1:]), dtype=pts.dtype)
    # every run is now at most one point, at cum - 1 (cum - per)
    one = (per == 1).astype(pts.dtype)
    pos = xp.maximum(cum - 1, 0)
    return pts[pos] * one[:, None]
