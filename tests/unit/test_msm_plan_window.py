"""D4's MSM plan (msm_plan.plan_msm): the GPU window and the CPU narrow class."""

from __future__ import annotations

import numpy as np


def test_d4_window_follows_the_nonzero_count():
    """D4's GPU window is the measured default for the non-zero scalars (one bit wider when sparse in bits);
    the narrow class starts at 5 % of scalars under 65 bits."""
    from gputrace.prover.msm_plan import default_window, plan_msm

    rng = np.random.default_rng(3)
    full = rng.integers(0, 2**63, size=(1 << 16, 4), dtype=np.uint64)
    full[:, 3] >>= 2  # < r
    assert plan_msm(full).window == default_window(1 << 16) == 11
    mostly_zero = full.copy()
    mostly_zero[(1 << 12):] = 0
    assert plan_msm(mostly_zero).window == default_window(1 << 12) == 7
    small = np.zeros_like(full)
    small[:, 0] = rng.integers(1, 2**20, size=1 << 16, dtype=np.uint64)  # popcount ~10: sparse bits
    p = plan_msm(small)
    assert p.window == 12 and p.narrow_bits == 65
    assert plan_msm(np.zeros((8, 4), dtype=np.uint64)).window == 4


def test_d4_plans_equal_the_defaults_for_this_circuit():
    """What docs/prover.md says of D4 on the Merkle/Poseidon circuit: its tails have under 1 % zeros and under
    0.1 % narrow scalars, so the CPU plan keeps one multiexp (narrow_bits 0) and the GPU window is the default."""
    from gputrace.prover.circuit import shape_for_constraints
    from gputrace.prover.msm_plan import default_window, plan_msm
    from gputrace.prover.witness_plan import make_plan, plan_witness

    for logn in (12, 14):
        shape = shape_for_constraints(1 << logn)
        w = plan_witness(make_plan(shape, 1, 0), 1 << logn)
        tail = w.z_limbs.copy()
        tail[np.all(tail == np.array([1, 0, 0, 0], dtype=np.uint64), axis=1)] = 0
        for scalars in (tail, tail[w.num_inputs:]):
            p = plan_msm(scalars)
            assert p.narrow_bits == 0 and p.window == default_window(len(scalars)), (logn, p)
