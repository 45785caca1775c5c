"""The witness plan (device synthesis's host half) and its Python reference against the R1CS synthesis."""

from __future__ import annotations

import numpy as np
import pytest

from gputrace.prover.circuit import validate_shape
from gputrace.prover.witness import synthesize_witness
from gputrace.prover.witness_plan import make_plan, make_plan_loop, plan_witness


@pytest.mark.parametrize("k,d,seed,circuit", [(1, 2, 1, 0), (3, 4, 7, 1), (8, 3, 2, 5), (5, 6, 3, 2)])
def test_plan_witness_equals_r1cs_synthesis(k, d, seed, circuit):
    shape = validate_shape(k, d)
    n = 1 << (shape.constraints + k + 2 - 1).bit_length()
    ref = synthesize_witness(shape, seed, circuit, n, frozenset({"a1"}))
    plan = make_plan(shape, seed, circuit)
    got = plan_witness(plan, n)
    assert got.public_inputs == ref.public_inputs
    assert (got.num_inputs, got.num_constraints) == (ref.num_inputs, ref.num_constraints)
    assert np.array_equal(got.z_limbs, ref.z_limbs)
    assert np.array_equal(got.abc, ref.abc)


def test_shared_siblings_name_the_challenge_that_computes_them():
    """With 8 challenges in a depth-3 tree every leaf is challenged: every sibling is another challenge's node."""
    plan = make_plan(validate_shape(8, 3), 2, 0)
    assert (plan.sib_src >= 0).all()
    assert not plan.sib_const.any()
    lone = make_plan(validate_shape(1, 5), 2, 0)
    assert (lone.sib_src == -1).all() and lone.sib_const.any()


def test_plan_too_big_for_the_domain():
    plan = make_plan(validate_shape(2, 3), 1, 0)
    with pytest.raises(ValueError, match="exceed the domain"):
        plan_witness(plan, 64)



@pytest.mark.parametrize("k,d,seed,circuit", [(1, 5, 2, 0), (8, 3, 2, 0), (50, 6, 1, 1), (267, 16, 3, 5), (5, 62, 1, 1),
                                              (30, 5, 9, 3)])
def test_vectorised_plan_equals_the_loop(k, d, seed, circuit):
    """The numpy plan (owners by np.unique, one draw per distinct stand-in node) equals the per-challenge loop,
    including deep trees (indices near 2^62) and trees where most paths merge (30 of 32 leaves challenged)."""
    shape = validate_shape(k, d)
    got, want = make_plan(shape, seed, circuit), make_plan_loop(shape, seed, circuit)
    for name in ("indices", "leaves", "sib_src", "sib_const"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
