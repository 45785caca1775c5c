"""The split of one assignment for the tail MSMs, written once for any array module (numpy or CuPy).

Before ``msm_l``, ``msm_a`` and ``msm_b_g1`` the pipeline removes the scalars equal to 1 (their bases are summed
by ``batch_add`` instead) and, with D4, plans each MSM from its scalars' counts (``msm_plan.plan_from_counts``).
``split_tail`` does all of it where the assignment lives, so on a GPU nothing but eight counters and the indices
of the ones comes back to the host (the 32 MB assignment of a 2^20 proof used to make a round trip).

``xp`` is the array module of ``z`` (``numpy`` or ``cupy``; only operations the two share are used, queued on
CuPy's current stream, no host synchronisation). ``z``: ``(vars, 4)`` uint64 limbs in the holder's representation
(Montgomery form on the CUDA backend), ``one``: the value 1 in that representation, ``canonical(t)``: a canonical
copy of ``t`` (identity for canonical limbs). Counters are exact and equal ``msm_plan.plan_msm``'s reductions
over the host's zeroed tail (``tests/unit/test_tail_split.py``).

Threads: pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .msm_plan import MsmPlan, plan_from_counts, seed_window_plan

#: The counters ``split_tail`` returns, in order: for the whole tail (``msm_a``/``msm_b_g1``) and for
#: ``tail[num_inputs:]`` (``msm_l``, suffix ``_l``): non-zero scalars, their total set bits, non-zero scalars of at
#: most 64 bits; then the scalars equal to 1 in z and in z[num_inputs:].
STATS = ("count", "popcount", "narrow", "count_l", "popcount_l", "narrow_l", "ones", "ones_l")
_M1, _M2, _M4, _H01 = 0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x0101010101010101


def popcount64(xp: Any, x: Any) -> Any:
    """Set bits of each uint64 element (the SWAR bit count: shifts, masks and one multiply, so numpy and CuPy
    run the same code; numpy's ``bitwise_count`` is not in every CuPy)."""
    u = xp.uint64
    x = x - ((x >> u(1)) & u(_M1))
    x = (x & u(_M2)) + ((x >> u(2)) & u(_M2))
    x = (x + (x >> u(4))) & u(_M4)
    return (x * u(_H01)) >> u(56)


def split_tail(xp: Any, z: Any, one: Any, canonical: Callable[[Any], Any], num_inputs: int) -> tuple[Any, Any, Any]:
    """``(mask, tail, stats)`` of assignment ``z``: ``mask`` (vars,) bool, the scalars equal to 1; ``tail``, ``z``
    with them set to 0 (same representation); ``stats``, uint64 ``(8,)`` in ``STATS`` order (a device array
    on a device). ValueError for a ``z`` that is not ``(vars, 4)``."""
    if z.ndim != 2 or z.shape[1] != 4:
        raise ValueError(f"split_tail: expected (vars, 4) limbs, got {z.shape}")
    ni = int(num_inputs)
    u = xp.uint64
    mask = xp.all(z == one, axis=1)
    tail = z * (~mask).astype(u)[:, None]
    c = canonical(tail)
    high = c[:, 1] | c[:, 2] | c[:, 3]
    nz = (high | c[:, 0]) != 0
    narrow = (high == 0) & nz
    pop = popcount64(xp, c).sum(axis=1, dtype=u)
    parts = (nz.sum(), pop.sum(dtype=u), narrow.sum(), nz[ni:].sum(), pop[ni:].sum(dtype=u), narrow[ni:].sum(),
             mask.sum(), mask[ni:].sum())
    return mask, tail, xp.stack([xp.asarray(p).astype(u) for p in parts])


def plans_from_stats(stats: Any, rule: str = "d4") -> tuple[MsmPlan, MsmPlan]:
    """(plan of ``msm_l``, plan of ``msm_a`` and ``msm_b_g1``) from ``split_tail``'s counters (host values).
    ``rule``: ``"d4"`` (``plan_from_counts``) or ``"seed"`` (the ``windows`` switch: ``seed_window_plan``)."""
    s = [int(v) for v in stats]
    if rule == "seed":
        return seed_window_plan(s[3]), seed_window_plan(s[0])
    if rule != "d4":
        raise ValueError(f"plan rule must be 'd4' or 'seed', got {rule!r}")
    return plan_from_counts(s[3], s[4], s[5]), plan_from_counts(s[0], s[1], s[2])


def ones_indices(xp: Any, mask: Any, stats_host: Any, num_inputs: int) -> tuple[Any, Any]:
    """(indices of the ones in z, indices of the ones in z[num_inputs:]) as int64 arrays of ``xp``. The
    indices are sorted, so the second is the last ``stats['ones_l']`` of the first, shifted (no search).
    ValueError when ``mask`` and the counters disagree."""
    idx = xp.nonzero(mask)[0].astype(xp.int64)
    ones, ones_l = int(stats_host[6]), int(stats_host[7])
    if idx.shape[0] != ones or ones_l > ones:
        raise ValueError(f"ones_indices: {idx.shape[0]} ones found, counters say {ones} / {ones_l}")
    return idx, idx[ones - ones_l:] - int(num_inputs)


def ones_indices_counted(xp: Any, mask: Any, ones: int, ones_l: int, num_inputs: int) -> tuple[Any, Any]:
    """``ones_indices`` when the host already knows the counts (``split_tail``'s counters): the indices scattered
    to their ranks (a cumulative sum; every other index to a spare slot past the end), so nothing is read back
    (``nonzero`` must size its result on the host: one synchronisation). The counters come from the same mask,
    so they agree by construction; ValueError for counts that cannot be (``ones_l`` above ``ones``)."""
    if not 0 <= ones_l <= ones <= mask.shape[0]:
        raise ValueError(f"ones_indices: counters say {ones} / {ones_l} ones of {mask.shape[0]}")
    rank = xp.cumsum(mask, dtype=xp.int64) - 1
    dst = xp.where(mask, rank, ones)
    out = xp.zeros(ones + 1, dtype=xp.int64)
    out[dst] = xp.arange(mask.shape[0], dtype=xp.int64)
    idx = out[:ones]
    return idx, idx[ones - ones_l:] - int(num_inputs)
