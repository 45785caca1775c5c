"""Synthesis of one circuit into what the proving pipeline needs (the ``synthesis`` phase body).

``synthesize_witness`` builds the R1CS with the layout and sizing the A1/A2 switches ask for,
checks every constraint (``UnsatisfiedConstraint`` names the first failing one), and returns the
assignment and the domain-sized a/b/c evaluation vectors as limb arrays (``backends/base.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .circuit import CircuitShape, MerkleInstance, make_instance, synthesize
from .field import ints_to_limbs
from .r1cs import ConstraintSystem


@dataclass
class Witness:
    """One synthesized circuit. ``z``: full assignment (ints); ``z_limbs``: the same as limbs;
    ``abc``: ``uint64`` ``(3, n, 4)`` — A·z, B·z, C·z padded to the domain with the input rows."""

    circuit: int
    public_inputs: list[int]
    z: list[int]
    z_limbs: np.ndarray
    abc: np.ndarray
    num_inputs: int
    num_constraints: int


def build_cs(shape: CircuitShape, inst: MerkleInstance, opts: frozenset[str]) -> ConstraintSystem:
    cs = ConstraintSystem(
        layout="packed" if "a1" in opts else "dict",
        capacity=shape.approx_vars if "a2" in opts else None,
    )
    synthesize(cs, inst)
    return cs


def synthesize_witness(shape: CircuitShape, seed: int, circuit: int, domain_size: int,
                       opts: frozenset[str], instance: MerkleInstance | None = None) -> Witness:
    """Synthesize circuit number ``circuit`` (its tree comes from ``seed`` and ``circuit``)."""
    inst = instance or make_instance(shape, seed * 1_000_003 + circuit)
    cs = build_cs(shape, inst, opts)
    a, b, c = cs.evaluate(check=True)
    z = cs.assignment
    m, ni = cs.num_constraints, cs.num_inputs
    if m + ni > domain_size:
        raise ValueError(f"circuit {circuit}: {m} constraints + {ni} inputs exceed the key's domain {domain_size}")
    pad = domain_size - m
    a = a + z[:ni] + [0] * (pad - ni)  # input rows: input_i * 0 = 0 (as in setup)
    b = b + [0] * pad
    c = c + [0] * pad
    abc = ints_to_limbs(a + b + c).reshape(3, domain_size, 4)
    return Witness(circuit, inst.public_inputs, list(z), ints_to_limbs(z), abc, ni, m)
