"""D4: per-MSM tuning from the scalars' popcount and bit-length histogram.

SupraSeal's D4 split one ``msm_t`` into three instances (L, A, B_G1) tuned for their scalar
distributions. Here ``plan_msm`` looks at one MSM's scalars and returns an ``MsmPlan``:

* ``window`` (GPU Pippenger bucket width): the measured best window for full-width scalars
  (``default_window``: log2 − 5 in [4, 15], the H200 sweep) applied to the *non-zero* count, one bit wider
  when the mean popcount is under 64 (sparse scalars leave most buckets empty). So a mostly-zero MSM gets a
  narrower window than its length would; this circuit's tails are under 2 % zeros, so at 2^20 the plan's
  window equals the default (the earlier rule, log2(count) − 3 capped at 16, chose c = 16, the chunk-imbalance
  case: 49 ms against 35 ms for c = 15 in the H200 2^20 proof, CUPTI kernels).
* ``narrow_bits`` (CPU split): 65 when at least 5 % of the non-zero scalars fit in 64 bits
  (they then go to a cheap narrow multiexp), else 0 (no narrow class).

Without D4 the pipeline passes ``plan=None`` and each backend uses one default configuration for
every MSM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .field import popcounts


@dataclass(frozen=True)
class MsmPlan:
    """Per-MSM tuning chosen by the D4 switch from the scalars' popcount / bit-length histogram.

    ``window``: Pippenger window in bits (the GPU backend's bucket width).
    ``narrow_bits``: scalars with fewer significant bits than this form a separate "narrow" MSM.
    The CPU backend uses it (arkworks picks its own Pippenger window internally, but its cost
    grows with the widest scalar, so splitting narrow from wide scalars is the real CPU knob).
    A backend uses whichever field matches its algorithm and documents that.
    """

    window: int
    narrow_bits: int


def default_window(n: int) -> int:
    """Window bits for an MSM of ``n`` full-width scalars: log2(n) − 5 in [4, 15] (the CUDA backend's default,
    from the H200 window sweep in benchmarks/RESULTS.md)."""
    return max(4, min(15, int(round(math.log2(max(n, 2)))) - 5))


def plan_msm(limbs: np.ndarray) -> MsmPlan:
    """The D4 plan for one MSM's scalars (``uint64`` ``(n, 4)``).

    Three reductions over the limbs (zero rows add no set bits, so the mean popcount of the non-zero scalars is
    the total over their count): 2^20 scalars in about 30 ms, where per-scalar bit lengths took 0.8 s.
    """
    arr = np.asarray(limbs, dtype=np.uint64).reshape(-1, 4)
    high = arr[:, 1] | arr[:, 2] | arr[:, 3]
    nz = (high | arr[:, 0]) != 0
    count = int(nz.sum())
    if count == 0:
        return MsmPlan(window=4, narrow_bits=0)
    return plan_from_counts(count, int(popcounts(arr).sum()), int(((high == 0) & nz).sum()))


def plan_from_counts(count: int, popcount_sum: int, narrow: int) -> MsmPlan:
    """``plan_msm``'s rule from its three reductions: the non-zero scalars' ``count``, the total of set bits
    (``popcount_sum``) and how many non-zero scalars fit in 64 bits (``narrow``). A device computes these
    three counters where the scalars are (``tail_split.split_tail``) and the host makes the plan from them."""
    if count == 0:
        return MsmPlan(window=4, narrow_bits=0)
    mean_pop = popcount_sum / count
    window = max(4, min(16, default_window(count) + (1 if mean_pop < 64 else 0)))
    narrow_share = narrow / count  # 1 .. 64 significant bits
    return MsmPlan(window=window, narrow_bits=65 if narrow_share >= 0.05 else 0)


def seed_window_plan(count: int) -> MsmPlan:
    """The ``windows`` regression switch: the per-MSM window rule the GPU path had first (log2(count) - 3, in
    [4, 16]): 16-bit windows from about 2^19 scalars, where the engine's own rule takes 15 (2^20 MSM: 49 against
    35 ms of kernels on the H200, docs/prover.md's switch table)."""
    if count <= 0:
        return MsmPlan(window=4, narrow_bits=0)
    return MsmPlan(window=max(4, min(16, int(round(math.log2(count))) - 3)), narrow_bits=0)
