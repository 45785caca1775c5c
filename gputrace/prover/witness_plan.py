"""Witness generation without building the R1CS: the circuit's regular layout, computed directly.

The Merkle/Poseidon circuit (``circuit.py``) is regular: every challenge allocates the same variables and
enforces the same constraints in the same order, and every row's ``A·z``, ``B·z``, ``C·z`` is a value the
Poseidon trace already holds (an S-box row is ``(v, v, x²)``, ``(x², x², x⁴)`` or ``(x⁴, v, x⁵)``). So the
witness needs no linear combinations, only the tree's inputs and the permutation's intermediate values:

* ``make_plan`` (host, cheap: random draws and index work, no hashing) replays ``make_instance``'s draws:
  the challenged indices, their leaves and the stand-in hash of every sibling no challenge computes. A
  sibling that *is* computed (it lies on another challenge's path) is named by that challenge
  (``sib_src[l, k] = j``: "challenge j's node at level l"), so the tree's hashes can be computed level by
  level on a device (``backends/cuda_witness.py``, kernel ``merkle_level``) from the plan alone.
* ``plan_witness`` is the same computation in Python ints: the reference (oracle) for the device kernel,
  checked against ``witness.synthesize_witness`` limb for limb (``tests/unit/test_witness_plan.py``).

Layout (exactly ``synthesize_challenges``'s allocation and constraint order; ``PER_*`` below):
z = [1, root, index_0 .. index_{K-1}, then per challenge: leaf, per level (sib, bit, t, 81 × (x², x⁴, x⁵))];
rows per challenge: per level (bool, select, 81 × 3 S-box rows), then ``index`` and ``root``; after the
``m`` constraint rows, one ``input_i · 0 = 0`` row per input (A = the input), then zero rows.

Threads: pure functions. Raises ValueError for a plan that does not match the shape.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from . import poseidon
from .circuit import POSEIDON_CONSTRAINTS, CircuitShape
from .field import R, ints_to_limbs
from .witness import Witness, instance_seed

SBOXES = POSEIDON_CONSTRAINTS // 3
#: Rows and private variables of one Merkle level, of one challenge.
PER_LEVEL_ROWS = 2 + POSEIDON_CONSTRAINTS
PER_LEVEL_VARS = 3 + POSEIDON_CONSTRAINTS


def rows_per_challenge(depth: int) -> int:
    return depth * PER_LEVEL_ROWS + 2


def vars_per_challenge(depth: int) -> int:
    return 1 + depth * PER_LEVEL_VARS


@dataclass
class WitnessPlan:
    """What a device needs to generate one circuit's witness.

    ``indices`` (K,) uint64 leaf indices (public inputs, in path order); ``leaves`` (K, 4) canonical limbs;
    ``sib_src`` (D, K) int32: ``j >= 0`` = the sibling of challenge k at level l is challenge j's node at
    level l (a leaf at level 0, a computed hash above), ``-1`` = the constant ``sib_const[l, k]`` (D, K, 4).
    """

    shape: CircuitShape
    circuit: int
    indices: np.ndarray
    leaves: np.ndarray
    sib_src: np.ndarray
    sib_const: np.ndarray

    @property
    def num_inputs(self) -> int:
        return 2 + self.shape.challenges  # ONE, root, K indices

    @property
    def num_constraints(self) -> int:
        return self.shape.challenges * rows_per_challenge(self.shape.depth)


def make_plan(shape: CircuitShape, seed: int, circuit: int) -> WitnessPlan:
    """The plan of circuit number ``circuit`` (its tree is ``make_instance(shape, instance_seed(seed, circuit))``'s).

    The owners of each level's nodes are found with numpy (``np.unique``: the first challenge on a node owns it,
    as ``make_instance``'s ``setdefault`` does); each stand-in sibling is drawn once per distinct node (challenges
    whose paths have merged share it). About a quarter faster than the per-challenge loop (``make_plan_loop``,
    kept as the reference) at 2^20 (267 challenges, depth 16): the rest is the stand-in draws, Python's seeded
    ``random`` by definition of the circuit, so they stay a loop (about 2,000 seeded draws per plan). The
    pipeline makes plans in processes started before the keys load, so they are off the workers' path.
    """
    iseed, indices, leaf_of = _draws(shape, seed, circuit)
    k_n, depth = shape.challenges, shape.depth
    draw = random.Random()  # re-seeded per node: the values of a fresh Random(same seed), without the object
    idx = np.array(indices, dtype=np.int64)  # depth <= 62 (validate_shape)
    sib_src = np.full((depth, k_n), -1, dtype=np.int32)
    consts = np.zeros((depth, k_n, 4), dtype=np.uint64)
    for level in range(depth):
        node = idx >> level
        uniq, first = np.unique(node, return_index=True)  # first: the lowest k on each node
        sib = node ^ 1
        pos = np.minimum(np.searchsorted(uniq, sib), len(uniq) - 1)
        found = uniq[pos] == sib
        sib_src[level] = np.where(found, first[pos], -1)
        lone = np.flatnonzero(~found)
        if lone.size:
            nodes, inv = np.unique(sib[lone], return_inverse=True)
            vals = ints_to_limbs([_stand_in(draw, iseed, level, v) for v in nodes.tolist()])
            consts[level, lone] = vals[inv.reshape(-1)]
    return WitnessPlan(shape=shape, circuit=circuit, indices=np.array(indices, dtype=np.uint64),
                       leaves=ints_to_limbs([leaf_of[i] for i in indices]), sib_src=sib_src, sib_const=consts)


def _stand_in(rng: random.Random, iseed: int, level: int, node: int) -> int:
    rng.seed(f"sub:{iseed}:{level}:{node}")
    return rng.randrange(R)


def _draws(shape: CircuitShape, seed: int, circuit: int) -> tuple[int, list[int], dict[int, int]]:
    """(instance seed, challenged indices, leaf value per index): ``make_instance``'s draws, in its order."""
    iseed = instance_seed(seed, circuit)
    rng = random.Random(f"merkle:{iseed}:{shape.challenges}:{shape.depth}")  # the draws make_instance makes, in order
    leaves_n = 1 << shape.depth
    indices = rng.sample(range(leaves_n), shape.challenges) if leaves_n < (1 << 60) else [
        rng.randrange(leaves_n) for _ in range(shape.challenges)
    ]
    leaf_of: dict[int, int] = {}
    for idx in indices:
        leaf_of[idx] = rng.randrange(R)  # a repeated index keeps its last draw, as make_instance's dict does
    return iseed, indices, leaf_of


def make_plan_loop(shape: CircuitShape, seed: int, circuit: int) -> WitnessPlan:
    """``make_plan`` written as one loop per level and challenge (the reference the vectorised plan is tested
    against)."""
    iseed, indices, leaf_of = _draws(shape, seed, circuit)
    k_n, depth = shape.challenges, shape.depth
    sib_src = np.full((depth, k_n), -1, dtype=np.int32)
    consts: list[int] = [0] * (depth * k_n)
    for level in range(depth):
        owner: dict[int, int] = {}
        for k, idx in enumerate(indices):
            owner.setdefault(idx >> level, k)
        for k, idx in enumerate(indices):
            sib = (idx >> level) ^ 1
            j = owner.get(sib)
            if j is not None:
                sib_src[level, k] = j
            else:  # a subtree no challenge enters: make_instance's stand-in for this node
                consts[level * k_n + k] = random.Random(f"sub:{iseed}:{level}:{sib}").randrange(R)
    return WitnessPlan(
        shape=shape, circuit=circuit, indices=np.array(indices, dtype=np.uint64),
        leaves=ints_to_limbs([leaf_of[i] for i in indices]), sib_src=sib_src,
        sib_const=ints_to_limbs(consts).reshape(depth, k_n, 4),
    )


def _permute_rows(s1: int, s2: int, rows: list[tuple[int, int, int]], zs: list[int]) -> int:
    """Poseidon on [0, s1, s2] as the gadget constrains it: appends its S-box rows and variables; returns out[0]."""
    rcs, mds = poseidon.constants()
    s = [0, s1 % R, s2 % R]
    half = poseidon.FULL_ROUNDS // 2
    w = poseidon.WIDTH
    for rnd in range(poseidon.FULL_ROUNDS + poseidon.PARTIAL_ROUNDS):
        s = [(s[i] + rcs[rnd * w + i]) % R for i in range(w)]
        full = rnd < half or rnd >= half + poseidon.PARTIAL_ROUNDS
        for i in range(w if full else 1):
            v = s[i]
            x2 = v * v % R
            x4 = x2 * x2 % R
            x5 = x4 * v % R
            rows += [(v, v, x2), (x2, x2, x4), (x4, v, x5)]
            zs += [x2, x4, x5]
            s[i] = x5
        s = [sum(mds[i][j] * s[j] for j in range(w)) % R for i in range(w)]
    return s[0]


def plan_witness(plan: WitnessPlan, domain_size: int) -> Witness:
    """The ``Witness`` of ``plan`` computed in Python ints (the device kernel's reference)."""
    from .field import limbs_to_ints

    shape = plan.shape
    k_n, depth = shape.challenges, shape.depth
    ni, m = plan.num_inputs, plan.num_constraints
    if m + ni > domain_size:
        raise ValueError(f"{m} constraints + {ni} inputs exceed the domain {domain_size}")
    consts = limbs_to_ints(plan.sib_const.reshape(-1, 4))
    cur = [limbs_to_ints(plan.leaves)]
    rows: list[list[tuple[int, int, int]]] = [[] for _ in range(k_n)]
    zs: list[list[int]] = [[cur[0][k]] for k in range(k_n)]
    for level in range(depth):
        nxt = []
        for k in range(k_n):
            c = cur[level][k]
            j = int(plan.sib_src[level, k])
            sib = cur[level][j] if j >= 0 else consts[level * k_n + k]
            bit = (int(plan.indices[k]) >> level) & 1
            t = bit * (sib - c) % R
            rows[k] += [(bit, bit, bit), (bit, (sib - c) % R, t)]
            zs[k] += [sib, bit, t]
            nxt.append(_permute_rows(c + t, sib - t, rows[k], zs[k]))
        cur.append(nxt)
    root = cur[depth][0]
    inputs = [1, root] + [int(i) for i in plan.indices]
    flat: list[tuple[int, int, int]] = []
    for k in range(k_n):
        flat += rows[k]
        flat += [(inputs[2 + k], 1, inputs[2 + k]), (cur[depth][k], 1, root)]
    abc = np.zeros((3, domain_size, 4), dtype=np.uint64)
    abc[:, :m] = ints_to_limbs([v for row in flat for v in row]).reshape(m, 3, 4).transpose(1, 0, 2)
    abc[0, m:m + ni] = ints_to_limbs(inputs)
    z = ints_to_limbs(inputs + [v for k in range(k_n) for v in zs[k]])
    return Witness(plan.circuit, inputs[1:], z, abc, ni, m)
