"""The circuit's R1CS as K copies of one challenge's block, for key generation without the whole R1CS.

``circuit.synthesize_challenges`` allocates ONE, the root and the K index inputs, then constrains the
challenges one after another, each with the same rows and coefficients: challenge k's rows are rows
``k·per .. k·per + per − 1`` and its private variables ``K + 2 + k·vpc ..``; the only inputs it touches
are ONE, the root and its own index. So the template R1CS of a K-challenge shape is the block of the
K = 1 circuit of the same depth (a few thousand constraints, synthesized in well under a second) with
block variable ``v`` of challenge ``k`` standing for global variable ``global_var(v, k)``.

Key generation needs two things from the R1CS, both linear in it and so computable per block:
the column sums u/v/w(τ) = Σ_j M[j][i]·L_j(τ) (``column_values``) and the fingerprint's A·r, B·r, C·r
for the fixed pseudo-random vector r (``row_values``, ``fingerprint_vector``). The functions here do it
with Python ints, term by term: the reference the GPU version (``backends/cuda_fixed_base``) is tested
against, and what proves the decomposition equals ``ConstraintSystem.column_sums``/``fingerprint``
(tests/unit/test_setup_block.py). Nothing here is fast; the GPU path is.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import overload

import numpy as np

from ..circuit import CircuitShape
from ..field import R, limbs_to_ints
from .template import template_cs

#: Seed of ``ConstraintSystem.fingerprint``'s vector (must stay equal to it: the digest names cached keys).
FINGERPRINT_SEED = 0x67707472
_R_LIMBS = [(R >> (64 * i)) & ((1 << 64) - 1) for i in range(4)]


@dataclass
class BlockTemplate:
    """One challenge's rows of the template R1CS and how K copies of it make the whole.

    ``terms[m]`` (m = 0, 1, 2 for A, B, C): ``(rows, vars, coefs)`` of every term of the block in the
    order synthesis wrote them (a variable may repeat within a row: the terms add up); ``rows`` and
    ``vars`` are int64 arrays, ``coefs`` a list of canonical ints. Block variables: 0 = ONE, 1 = root,
    2 = the challenge's index, 3 .. 3 + vpc − 1 = its private variables."""

    shape: CircuitShape
    per: int  # constraints per challenge
    vpc: int  # private variables per challenge
    terms: list[tuple[np.ndarray, np.ndarray, list[int]]]

    @property
    def challenges(self) -> int:
        return self.shape.challenges

    @property
    def num_inputs(self) -> int:
        return self.challenges + 2  # ONE, root, one index per challenge

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.challenges * self.vpc

    @property
    def num_constraints(self) -> int:
        return self.challenges * self.per

    @property
    def block_vars(self) -> int:
        return 3 + self.vpc

    def domain_size(self) -> int:
        """As ``setup.domain_size_for``: the smallest power of two >= constraints + inputs."""
        n = 2
        while n < self.num_constraints + self.num_inputs:
            n <<= 1
        return n

    @overload
    def global_var(self, v: np.ndarray, k: int) -> np.ndarray: ...

    @overload
    def global_var(self, v: int, k: int) -> int: ...

    def global_var(self, v: np.ndarray | int, k: int) -> np.ndarray | int:
        """Global variable of block variable(s) ``v`` in challenge ``k``."""
        if isinstance(v, np.ndarray):
            out = v + (self.num_inputs - 3 + k * self.vpc)
            out = np.where(v == 2, 2 + k, out)
            return np.where(v < 2, v, out)
        if v < 2:
            return v
        return 2 + k if v == 2 else v + self.num_inputs - 3 + k * self.vpc


def block_template(shape: CircuitShape) -> BlockTemplate:
    """Synthesize one challenge of ``shape``'s depth and check it has the layout the decomposition assumes.

    Raises RuntimeError if it does not (a circuit change that breaks the block structure must not give
    silently wrong keys)."""
    one = CircuitShape(1, shape.depth)
    cs = template_cs(one)  # the same template synthesis as the whole-R1CS path
    per, vpc = cs.num_constraints, cs.num_vars - 3
    if cs.num_inputs != 3 or per * shape.challenges != shape.constraints or vpc != one.vars_for(1) - 3:
        raise RuntimeError(f"circuit block of depth {shape.depth} does not have the K-copies layout "
                           f"(inputs {cs.num_inputs}, constraints {per}, private vars {vpc})")
    terms = []
    for m in range(3):
        rows, vars_, coefs = [], [], []
        for j, i, c in cs.iter_terms(m):
            rows.append(j)
            vars_.append(i)
            coefs.append(c % R)
        terms.append((np.asarray(rows, dtype=np.int64), np.asarray(vars_, dtype=np.int64), coefs))
    return BlockTemplate(shape, per, vpc, terms)


def column_values(bt: BlockTemplate, m: int, weights: list[int]) -> list[int]:
    """For every global variable i: Σ_j M[j][i]·weights[j] mod r over the K copies (= ``column_sums``)."""
    rows, vars_, coefs = bt.terms[m]
    acc = [0] * bt.num_vars
    rl = rows.tolist()
    for k in range(bt.challenges):
        base = k * bt.per
        gv = bt.global_var(vars_, k).tolist()
        for r, g, c in zip(rl, gv, coefs, strict=True):
            acc[g] += c * weights[base + r]
    return [x % R for x in acc]


def row_values(bt: BlockTemplate, m: int, z: list[int]) -> list[int]:
    """M·z for the whole R1CS (one value per constraint, row k·per + r), as ``ConstraintSystem.evaluate``."""
    rows, vars_, coefs = bt.terms[m]
    out = [0] * bt.num_constraints
    rl = rows.tolist()
    for k in range(bt.challenges):
        base = k * bt.per
        gv = bt.global_var(vars_, k).tolist()
        for r, g, c in zip(rl, gv, coefs, strict=True):
            out[base + r] += c * z[g]
    return [x % R for x in out]


def fingerprint_vector(count: int) -> np.ndarray:
    """The first ``count`` values of ``ConstraintSystem.fingerprint``'s vector
    (``random.Random(FINGERPRINT_SEED).randrange(R)`` each), as ``uint64`` limbs ``(count, 4)``, vectorised.

    ``randrange(R)`` draws ``getrandbits(255)`` (eight 32-bit Mersenne Twister outputs, least significant
    first, the last shifted right by one) until the value is below R; numpy's MT19937 started from the
    same state gives the same outputs, so whole 8-word candidates are drawn at once and the rejected ones
    dropped in order."""
    st = random.Random(FINGERPRINT_SEED).getstate()[1]
    bg = np.random.MT19937()
    bg.state = {"bit_generator": "MT19937", "state": {"key": np.array(st[:624], dtype=np.uint32), "pos": st[624]}}
    out = np.empty((count, 4), dtype=np.uint64)
    got = 0
    while got < count:
        cand = min(1 << 20, max(1024, int((count - got) * 2.3)))  # bounded chunks: no multi-GB temporaries
        w = bg.random_raw(8 * cand).reshape(cand, 8)  # uint64 holding 32-bit outputs
        w[:, 7] >>= np.uint64(1)
        limbs = w[:, 0::2] | (w[:, 1::2] << np.uint64(32))
        below = np.zeros(cand, dtype=bool)
        eq = np.ones(cand, dtype=bool)
        for i in (3, 2, 1, 0):
            below |= eq & (limbs[:, i] < np.uint64(_R_LIMBS[i]))
            eq &= limbs[:, i] == np.uint64(_R_LIMBS[i])
        ok = limbs[below]
        take = min(len(ok), count - got)
        out[got:got + take] = ok[:take]
        got += take
        if take < len(ok):  # drawn past the last value needed: harmless, the generator is not reused
            break
    return out


def fingerprint_digest(num_inputs: int, num_vars: int, num_constraints: int, abc_bytes: Iterable) -> str:
    """``ConstraintSystem.fingerprint``'s digest from A·r, B·r, C·r as 32-byte little-endian rows, given as
    consecutive buffers (bytes or contiguous arrays; any split of the same byte sequence gives the same digest)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"r1cs:{num_inputs}:{num_vars}:{num_constraints}".encode())
    for b in abc_bytes:
        h.update(b)
    return h.hexdigest()


def fingerprint_host(bt: BlockTemplate) -> str:
    """The template R1CS's fingerprint from the block, with Python ints (the reference for the GPU's)."""
    z = limbs_to_ints(fingerprint_vector(bt.num_vars))
    abc = [b"".join(x.to_bytes(32, "little") for x in row_values(bt, m, z)) for m in range(3)]
    return fingerprint_digest(bt.num_inputs, bt.num_vars, bt.num_constraints, abc)
