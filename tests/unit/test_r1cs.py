"""R1CS builder: layouts (A1), pre-sizing (A2), satisfaction errors, the Merkle circuit's shape."""

import pytest

from gputrace.prover.circuit import CircuitShape, make_instance, shape_for_constraints, synthesize, validate_shape
from gputrace.prover.field import R
from gputrace.prover.poseidon import hash2
from gputrace.prover.r1cs import ONE, ConstraintSystem, UnsatisfiedConstraint
from gputrace.prover.witness import build_cs


def test_layouts_and_presizing_give_identical_results():
    shape = CircuitShape(2, 3)
    inst = make_instance(shape, 7)
    results = []
    for opts in (frozenset(), {"a1"}, {"a2"}, {"a1", "a2"}):
        cs = build_cs(shape, inst, frozenset(opts))
        assert cs.num_constraints == shape.constraints
        assert cs.num_vars == shape.approx_vars
        results.append((cs.evaluate(), cs.assignment, cs.fingerprint()))
    assert all(r == results[0] for r in results[1:])
    assert build_cs(shape, inst, frozenset({"a1"})).layout == "packed"
    assert build_cs(shape, inst, frozenset())._rows  # dict layout really stores per-LC dicts


def test_fingerprint_depends_on_structure_not_witness():
    shape = CircuitShape(1, 2)
    f1 = build_cs(shape, make_instance(shape, 1), frozenset()).fingerprint()
    f2 = build_cs(shape, make_instance(shape, 2), frozenset({"a1"})).fingerprint()
    f3 = build_cs(CircuitShape(1, 3), make_instance(CircuitShape(1, 3), 1), frozenset()).fingerprint()
    assert f1 == f2 and f1 != f3


@pytest.mark.parametrize("layout", ["dict", "packed"])
def test_unsatisfied_constraint_names_the_first_failure(layout):
    cs = ConstraintSystem(layout)
    x = cs.alloc(3)
    y = cs.alloc(9)
    cs.enforce([(x, 1)], [(x, 1)], [(y, 1)], "square")
    cs.enforce([(x, 2)], [(ONE, 1)], [(y, 1)], "double")  # 6 != 9
    cs.enforce([(x, 1)], [(ONE, 1)], [(y, 1)], "third")
    with pytest.raises(UnsatisfiedConstraint, match=r"constraint 1 \('double'\)") as ei:
        cs.check()
    assert ei.value.index == 1


def test_wrong_merkle_witness_is_rejected():
    shape = CircuitShape(1, 3)
    inst = make_instance(shape, 5)
    inst.paths[0][2][1] = (inst.paths[0][2][1] + 1) % R  # corrupt a sibling
    cs = ConstraintSystem("packed")
    synthesize(cs, inst)
    with pytest.raises(UnsatisfiedConstraint, match=r"ch0\.root"):
        cs.check()


def test_native_tree_is_consistent():
    shape = CircuitShape(3, 4)
    inst = make_instance(shape, 9)
    assert len({p[0] for p in inst.paths}) == 3
    for idx, leaf, sibs in inst.paths:
        cur = leaf
        for level, sib in enumerate(sibs):
            cur = hash2(sib, cur) if (idx >> level) & 1 else hash2(cur, sib)
        assert cur == inst.root
    assert inst.public_inputs[0] == inst.root


def test_inputs_must_come_first():
    cs = ConstraintSystem()
    cs.alloc(1)
    with pytest.raises(ValueError, match="public inputs"):
        cs.alloc_input(2)
    with pytest.raises(ValueError):
        ConstraintSystem("smallvec")


def test_shape_selection():
    for n in (10, 12, 16, 20, 22):
        s = shape_for_constraints(1 << n)
        assert 0.9 < s.constraints / (1 << n) <= 1, (n, s)
        assert s.constraints + s.num_public + 1 <= 1 << n  # the NTT domain is exactly 2^n
    assert shape_for_constraints(1 << 22).constraints >= 1 << 21
    with pytest.raises(ValueError, match="challenges"):
        validate_shape(5, 2)
    with pytest.raises(ValueError, match="depth"):
        validate_shape(1, 0)


def test_presized_vector_grows_when_hint_is_short():
    cs = ConstraintSystem("dict", capacity=2)
    vs = [cs.alloc(i) for i in range(5)]
    assert [cs.value(v) for v in vs] == list(range(5))
    assert cs.assignment[0] == 1 and len(cs.assignment) == 6


def test_column_sums_agree_between_layouts():
    import random

    shape = CircuitShape(2, 2)
    inst = make_instance(shape, 4)
    d = build_cs(shape, inst, frozenset())
    p = build_cs(shape, inst, frozenset({"a1"}))
    rng = random.Random(5)
    w = [rng.randrange(R) for _ in range(d.num_constraints)]
    for m in range(3):
        naive = [0] * d.num_vars
        for j, i, k in d.iter_terms(m):
            naive[i] = (naive[i] + k * w[j]) % R
        assert d.column_sums(m, w) == naive == p.column_sums(m, w)


def test_unsatisfied_constraint_pickles():
    import pickle

    e = pickle.loads(pickle.dumps(UnsatisfiedConstraint(4, "ch0.root", 1, 2, 3)))
    assert isinstance(e, UnsatisfiedConstraint) and e.index == 4 and "ch0.root" in str(e)
