"""Synthesis of one circuit into what the proving pipeline needs (the ``synthesis`` phase body).

``synthesize_witness`` builds the R1CS with the layout and sizing the A1/A2 switches ask for,
checks every constraint (``UnsatisfiedConstraint`` names the first failing one), and returns the
assignment and the domain-sized a/b/c evaluation vectors as limb arrays (``backends/base.py``).

``synthesize_part`` does the same for a contiguous range of the circuit's challenges (each part
allocates all public inputs, then only its challenges), and ``merge_parts`` joins the parts of
consecutive ranges into the ``Witness`` that ``synthesize_witness`` gives, identical to the last
limb. The pipeline runs the parts in separate processes, so one circuit's synthesis (pure Python)
uses several cores. Parts return limbs, not Python ints: cheap to send between processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from .circuit import CircuitShape, MerkleInstance, make_instance, synthesize_challenges
from .field import ints_to_limbs
from .r1cs import ConstraintSystem


@dataclass
class Witness:
    """One synthesized circuit. ``z_limbs``: the full assignment as limbs;
    ``abc``: ``uint64`` ``(3, n, 4)`` — A·z, B·z, C·z padded to the domain with the input rows. Both None for a
    circuit whose witness a device made and kept (only its public inputs come back to the host)."""

    circuit: int
    public_inputs: list[int]
    z_limbs: np.ndarray | None
    abc: np.ndarray | None
    num_inputs: int
    num_constraints: int


def build_cs(shape: CircuitShape, inst: MerkleInstance, opts: frozenset[str],
             ks: range | None = None) -> ConstraintSystem:
    """The constraint system of challenges ``ks`` (default: all, the whole circuit) with the A1 layout and
    A2 pre-sizing ``opts`` ask for."""
    ks = range(shape.challenges) if ks is None else ks
    cs = ConstraintSystem(
        layout="packed" if "a1" in opts else "dict",
        capacity=shape.vars_for(len(ks)) if "a2" in opts else None,
    )
    synthesize_challenges(cs, inst, ks)
    return cs


def synthesize_witness(shape: CircuitShape, seed: int, circuit: int, domain_size: int,
                       opts: frozenset[str], instance: MerkleInstance | None = None) -> Witness:
    """Synthesize circuit number ``circuit`` (its tree comes from ``seed`` and ``circuit``): one part
    covering every challenge."""
    part = synthesize_part(shape, seed, circuit, opts, 0, shape.challenges, instance)
    return merge_parts(shape, circuit, domain_size, [part])


@dataclass
class WitnessPart:
    """Challenges ``lo`` .. ``hi``-1 of one circuit: their private values and a/b/c rows (limbs)."""

    lo: int
    hi: int
    public_inputs: list[int]  # the circuit's (root, then every challenge's index): the same in every part
    aux_limbs: np.ndarray  # (vars, 4): the private variables of these challenges, in allocation order
    abc: np.ndarray  # (3, constraints, 4)


def instance_seed(seed: int, circuit: int) -> int:
    return seed * 1_000_003 + circuit


def split_challenges(challenges: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous, near-equal ``(lo, hi)`` ranges covering 0 .. ``challenges`` (fewer if K < parts)."""
    parts = max(1, min(parts, challenges))
    cuts = [challenges * i // parts for i in range(parts + 1)]
    return list(pairwise(cuts))


def synthesize_part(shape: CircuitShape, seed: int, circuit: int, opts: frozenset[str], lo: int, hi: int,
                    instance: MerkleInstance | None = None) -> WitnessPart:
    """Synthesize and check challenges ``lo`` .. ``hi``-1 of circuit number ``circuit``.

    Raises ``UnsatisfiedConstraint`` (its index counts from the part's first constraint; its name
    carries the challenge number) and ValueError for an empty or out-of-range part."""
    if not 0 <= lo < hi <= shape.challenges:
        raise ValueError(f"challenge range {lo}..{hi} outside 0..{shape.challenges}")
    inst = instance or make_instance(shape, instance_seed(seed, circuit))
    cs = build_cs(shape, inst, opts, range(lo, hi))
    a, b, c = cs.evaluate(check=True)
    m = cs.num_constraints
    return WitnessPart(lo, hi, inst.public_inputs, ints_to_limbs(cs.assignment[cs.num_inputs:]),
                       ints_to_limbs(a + b + c).reshape(3, m, 4))


def merge_parts(shape: CircuitShape, circuit: int, domain_size: int, parts: list[WitnessPart]) -> Witness:
    """The ``Witness`` of circuit number ``circuit`` from parts covering its challenges in order.

    Raises ValueError if the parts do not cover 0 .. K contiguously, disagree on the public inputs,
    or the circuit exceeds the domain."""
    parts = sorted(parts, key=lambda p: p.lo)
    if not parts or [p.lo for p in parts] != [0] + [p.hi for p in parts[:-1]] or parts[-1].hi != shape.challenges:
        raise ValueError(f"parts {[(p.lo, p.hi) for p in parts]} do not cover challenges 0..{shape.challenges}")
    public = parts[0].public_inputs
    if any(p.public_inputs != public for p in parts[1:]):
        raise ValueError(f"circuit {circuit}: parts disagree on the public inputs (different instances)")
    inputs = ints_to_limbs([1] + public)
    ni = len(inputs)
    m = sum(p.abc.shape[1] for p in parts)
    if m + ni > domain_size:
        raise ValueError(f"circuit {circuit}: {m} constraints + {ni} inputs exceed the key's domain {domain_size}")
    abc = np.zeros((3, domain_size, 4), dtype=np.uint64)
    row = 0
    for p in parts:
        abc[:, row:row + p.abc.shape[1]] = p.abc
        row += p.abc.shape[1]
    abc[0, m:m + ni] = inputs  # input rows: input_i * 0 = 0 (as in setup)
    z = np.concatenate([inputs] + [p.aux_limbs for p in parts])
    return Witness(circuit, list(public), z, abc, ni, m)
