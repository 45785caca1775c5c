"""Poseidon: published known-answer vector, and the in-circuit gadget agrees with the native hash."""

from gputrace.prover import poseidon
from gputrace.prover.circuit import POSEIDON_CONSTRAINTS, poseidon_gadget
from gputrace.prover.field import R
from gputrace.prover.r1cs import ConstraintSystem

# hadeshash test_vectors.txt, poseidonperm_x5_255_3 (BLS12-381 Fr, t=3, R_F=8, R_P=57): perm([0, 1, 2]).
KAT = [
    0x28CE19420FC246A05553AD1E8C98F5C9D67166BE2C18E9E4CB4B4E317DD2A78A,
    0x51F3E312C95343A896CFD8945EA82BA956C1118CE9B9859B6EA56637B4B1DDC4,
    0x3B2B69139B235626A0BFB56C9527AE66A7BF486AD8C11C14D1DA0C69BBE0F79A,
]


def test_permutation_matches_published_vector():
    assert poseidon.permute([0, 1, 2]) == KAT


def test_constants_shape_and_range():
    rcs, mds = poseidon.constants()
    assert len(rcs) == (poseidon.FULL_ROUNDS + poseidon.PARTIAL_ROUNDS) * poseidon.WIDTH
    assert all(0 <= c < R for c in rcs)
    assert len(mds) == 3 and all(len(r) == 3 for r in mds)


def test_gadget_matches_native_and_is_satisfied():
    for layout in ("dict", "packed"):
        cs = ConstraintSystem(layout)
        a, b = cs.alloc(11), cs.alloc(22)
        out = poseidon_gadget(cs, [([], 0), ([(a, 1)], 11), ([(b, 1)], 22)], "h")
        assert out[0][1] == poseidon.hash2(11, 22)
        assert cs.lc_value(out[0][0]) == out[0][1]
        assert cs.num_constraints == POSEIDON_CONSTRAINTS == 243
        cs.check()
