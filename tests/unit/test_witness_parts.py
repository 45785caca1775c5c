"""One circuit synthesised in challenge-range parts and merged equals the whole synthesis, limb for limb."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gputrace.prover.circuit import make_instance, shape_for_constraints, validate_shape
from gputrace.prover.r1cs import UnsatisfiedConstraint
from gputrace.prover.witness import (instance_seed, merge_parts, split_challenges, synthesize_part,
                                     synthesize_witness)


def _domain(shape) -> int:
    n = 2
    while n < shape.constraints + shape.num_public + 1:
        n *= 2
    return n


@pytest.mark.parametrize("shape,opts", [
    (validate_shape(5, 3), frozenset()),
    (validate_shape(7, 3), frozenset({"a1", "a2"})),
    (shape_for_constraints(1 << 11), frozenset({"a2"})),
])
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 9])
@pytest.mark.slow
def test_parts_merge_to_the_whole_witness(shape, opts, parts):
    dom = _domain(shape)
    whole = synthesize_witness(shape, 3, 2, dom, opts)
    ps = [synthesize_part(shape, 3, 2, opts, lo, hi) for lo, hi in split_challenges(shape.challenges, parts)]
    merged = merge_parts(shape, 2, dom, ps[::-1])  # any order
    assert np.array_equal(merged.z_limbs, whole.z_limbs)
    assert np.array_equal(merged.abc, whole.abc)
    assert (merged.num_inputs, merged.num_constraints, merged.public_inputs, merged.circuit) == \
        (whole.num_inputs, whole.num_constraints, whole.public_inputs, whole.circuit)


def test_split_challenges():
    assert split_challenges(7, 3) == [(0, 2), (2, 4), (4, 7)]
    assert split_challenges(2, 5) == [(0, 1), (1, 2)]
    assert split_challenges(4, 0) == [(0, 4)]


def test_merge_refuses_gaps_overlaps_and_mixed_instances():
    shape, dom = validate_shape(4, 2), _domain(validate_shape(4, 2))
    p01, p12, p24 = (synthesize_part(shape, 1, 0, frozenset(), lo, hi) for lo, hi in ((0, 1), (1, 2), (2, 4)))
    with pytest.raises(ValueError, match="do not cover"):
        merge_parts(shape, 0, dom, [p01, p24])
    with pytest.raises(ValueError, match="do not cover"):
        merge_parts(shape, 0, dom, [p01, p12])
    with pytest.raises(ValueError, match="do not cover"):
        merge_parts(shape, 0, dom, [])
    other = synthesize_part(shape, 1, 5, frozenset(), 2, 4)  # another circuit's tree
    with pytest.raises(ValueError, match="disagree on the public inputs"):
        merge_parts(shape, 0, dom, [p01, p12, other])
    with pytest.raises(ValueError, match="exceed the key's domain"):
        merge_parts(shape, 0, 8, [p01, p12, p24])
    with pytest.raises(ValueError, match="outside"):
        synthesize_part(shape, 1, 0, frozenset(), 3, 3)


def test_a_wrong_path_fails_in_its_part_naming_the_challenge():
    shape = validate_shape(4, 2)
    inst = make_instance(shape, instance_seed(1, 0))
    bad = dataclasses.replace(inst, paths=[list(p) for p in inst.paths])
    bad.paths[2][2] = [bad.paths[2][2][0] + 1] + bad.paths[2][2][1:]
    synthesize_part(shape, 1, 0, frozenset(), 0, 2, instance=bad)  # challenges 0, 1 are still right
    with pytest.raises(UnsatisfiedConstraint, match=r"'ch2\.root'"):
        synthesize_part(shape, 1, 0, frozenset(), 2, 4, instance=bad)
