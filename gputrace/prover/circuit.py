"""The PoRep-like circuit: K Merkle inclusion proofs (Poseidon, width 3) in a tree of depth D.

Public inputs: the root, then the K challenged leaf indices. Per challenge the witness holds the
leaf, D siblings and D direction bits (boolean witnesses, so the assignment has real runs of 0/1
values beside full-width field elements). Per level: ``b·b = b`` (boolean), ``b·(sib − cur) = t``
(select), then ``hash2(cur + t, sib − t)`` with the in-circuit Poseidon (3 constraints per S-box:
x², x⁴, x⁵; round constants and MDS folded into the linear combinations). Per challenge the bits
are tied to the public index (``Σ 2^i·b_i · 1 = index``) and the top to the root (``cur · 1 = root``).

Constraints: K·(D·(2 + 243) + 2). ``shape_for_constraints(T)`` picks K and D so that the constraints
and inputs fill as much of T as possible without exceeding it (so 2^N targets give a 2^N domain).

The tree is sparse: only the challenged paths are computed with real hashes; the hash of any
subtree no challenge enters is a pseudo-random field element drawn from the circuit's seed (it
stands for data we never materialise). Paths are consistent: every challenge proves against the
same root, and the native root equals the in-circuit one.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from . import poseidon
from .field import R
from .r1cs import LC, ONE, ConstraintSystem

#: Constraints of one Poseidon permutation gadget: S-boxes × 3.
POSEIDON_CONSTRAINTS = 3 * (poseidon.FULL_ROUNDS * poseidon.WIDTH + poseidon.PARTIAL_ROUNDS)
CIRCUIT_ID = "merkle-poseidon-t3"


@dataclass(frozen=True)
class CircuitShape:
    """K challenges in a tree of depth D; everything the key depends on."""

    challenges: int
    depth: int

    @property
    def constraints(self) -> int:
        return self.challenges * (self.depth * (2 + POSEIDON_CONSTRAINTS) + 2)

    @property
    def num_public(self) -> int:
        """Public inputs excluding ONE: root + K indices."""
        return 1 + self.challenges

    @property
    def approx_vars(self) -> int:
        """Variables a synthesis allocates (exact; used for A2 pre-sizing)."""
        return self.vars_for(self.challenges)

    def vars_for(self, challenges: int) -> int:
        """Variables of a synthesis of ``challenges`` of the K challenges (ONE and all inputs included)."""
        per_level = 1 + 1 + 1 + POSEIDON_CONSTRAINTS  # sibling, bit, select t, S-box outputs
        return 1 + self.num_public + challenges * (1 + self.depth * per_level)

    def label(self) -> str:
        return f"K{self.challenges}-D{self.depth}"


def shape_for_constraints(target: int) -> CircuitShape:
    """Pick (K, D) with as many constraints as fit in ``target`` together with the inputs.

    Constraints + public inputs + ONE stay <= target, so ``--constraints 2^N`` gives an NTT domain of
    exactly 2^N. Depths from log2(target) − 9 to log2(target) − 4 (clamped to [2, 30]) are tried; the deepest
    tree whose fill is within 5 % of the fullest fit wins. Below one challenge's size, K = 1 at the largest depth
    that fits.
    """
    if target < 1:
        raise ValueError(f"constraint target must be positive, got {target}")
    n = max(1, round(math.log2(target)))
    fits = []
    for depth in range(max(2, n - 9), max(2, min(30, n - 4)) + 1):
        per = depth * (2 + POSEIDON_CONSTRAINTS) + 2
        k = (target - 1) // (per + 1)  # K·per constraints + (1 + K) inputs + ONE <= target
        if k >= 1:
            fits.append((k * per, CircuitShape(k, depth)))
    if fits:
        top = max(f for f, _ in fits)
        return max((sh for f, sh in fits if f >= 0.95 * top), key=lambda sh: sh.depth)
    for depth in range(30, 1, -1):
        if depth * (2 + POSEIDON_CONSTRAINTS) + 5 <= target:
            return CircuitShape(1, depth)
    return CircuitShape(1, 2)


def validate_shape(challenges: int, depth: int) -> CircuitShape:
    if challenges < 1:
        raise ValueError(f"--challenges must be >= 1, got {challenges}")
    if not 1 <= depth <= 62:
        raise ValueError(f"--depth must be between 1 and 62, got {depth}")
    if challenges > (1 << depth):
        raise ValueError(f"--challenges {challenges} exceeds the {1 << depth} leaves of a depth-{depth} tree")
    return CircuitShape(challenges, depth)


@dataclass
class MerkleInstance:
    """A tree's challenged paths: ``paths[k] = (index, leaf, [sibling per level, bottom up])``."""

    shape: CircuitShape
    root: int
    paths: list[tuple[int, int, list[int]]]

    @property
    def public_inputs(self) -> list[int]:
        return [self.root] + [p[0] for p in self.paths]


def make_instance(shape: CircuitShape, seed: int) -> MerkleInstance:
    """A deterministic sparse tree for ``seed`` with K distinct challenged leaves."""
    rng = random.Random(f"merkle:{seed}:{shape.challenges}:{shape.depth}")
    leaves_n = 1 << shape.depth
    indices = rng.sample(range(leaves_n), shape.challenges) if leaves_n < (1 << 60) else [
        rng.randrange(leaves_n) for _ in range(shape.challenges)
    ]
    nodes: dict[tuple[int, int], int] = {}
    for idx in indices:
        nodes[(0, idx)] = rng.randrange(R)

    def node(level: int, pos: int) -> int:
        v = nodes.get((level, pos))
        if v is None:  # an unchallenged subtree: stand-in hash from the seed
            v = random.Random(f"sub:{seed}:{level}:{pos}").randrange(R)
            nodes[(level, pos)] = v
        return v

    live = set(indices)
    for level in range(shape.depth):
        parents = sorted({p >> 1 for p in live})
        for p in parents:
            nodes[(level + 1, p)] = poseidon.hash2(node(level, 2 * p), node(level, 2 * p + 1))
        live = set(parents)
    root = nodes[(shape.depth, 0)]
    paths = []
    for idx in indices:
        sibs = [node(level, (idx >> level) ^ 1) for level in range(shape.depth)]
        paths.append((idx, nodes[(0, idx)], sibs))
    return MerkleInstance(shape, root, paths)


# -- gadgets ---------------------------------------------------------------------------------

def _mix(lcs: list[dict[int, int]], row: tuple[int, ...]) -> dict[int, int]:
    """Σ_j row[j]·lcs[j] as one merged LC (one modular reduction per term at the end)."""
    acc: dict[int, int] = {}
    get = acc.get
    for lc, k in zip(lcs, row, strict=True):
        for v, c in lc.items():
            acc[v] = get(v, 0) + c * k
    return {v: c % R for v, c in acc.items()}


def _sbox(cs: ConstraintSystem, lc: LC, val: int, name: str) -> tuple[LC, int]:
    x2v = val * val % R
    x2 = cs.alloc(x2v)
    cs.enforce(lc, lc, [(x2, 1)], name + ".x2")
    x4v = x2v * x2v % R
    x4 = cs.alloc(x4v)
    cs.enforce([(x2, 1)], [(x2, 1)], [(x4, 1)], name + ".x4")
    x5v = x4v * val % R
    x5 = cs.alloc(x5v)
    cs.enforce([(x4, 1)], lc, [(x5, 1)], name + ".x5")
    return [(x5, 1)], x5v


def poseidon_gadget(cs: ConstraintSystem, state: list[tuple[LC, int]], name: str) -> list[tuple[LC, int]]:
    """In-circuit Poseidon permutation. ``state``: width-3 list of (LC, value). Returns the new state."""
    rcs, mds = poseidon.constants()
    width = poseidon.WIDTH
    half = poseidon.FULL_ROUNDS // 2
    k = 0
    lcs: list[dict[int, int]] = []
    vals: list[int] = []
    for lc, v in state:
        d: dict[int, int] = {}
        for var, c in lc:
            d[var] = (d.get(var, 0) + c) % R
        lcs.append(d)
        vals.append(v % R)
    for rnd in range(poseidon.FULL_ROUNDS + poseidon.PARTIAL_ROUNDS):
        for i in range(width):
            rc = rcs[k + i]
            d = dict(lcs[i])
            d[ONE] = (d.get(ONE, 0) + rc) % R
            lcs[i] = d
            vals[i] = (vals[i] + rc) % R
        k += width
        full = rnd < half or rnd >= half + poseidon.PARTIAL_ROUNDS
        for i in range(width if full else 1):
            out, vals[i] = _sbox(cs, list(lcs[i].items()), vals[i], f"{name}.r{rnd}.s{i}")
            lcs[i] = dict(out)
        lcs = [_mix(lcs, mds[i]) for i in range(width)]
        vals = [sum(mds[i][j] * vals[j] for j in range(width)) % R for i in range(width)]
    return [(list(lc.items()), v) for lc, v in zip(lcs, vals, strict=True)]


def synthesize(cs: ConstraintSystem, inst: MerkleInstance) -> None:
    """Allocate and constrain the whole circuit for ``inst`` into ``cs`` (fills the witness)."""
    synthesize_challenges(cs, inst, range(inst.shape.challenges))


def synthesize_challenges(cs: ConstraintSystem, inst: MerkleInstance, ks: range) -> None:
    """Allocate every public input, then constrain only challenges ``ks`` (contiguous, ascending).

    Challenges share nothing but the public inputs, and the whole circuit allocates and constrains them
    one after another, so the parts for consecutive ranges, concatenated (private variables and
    constraints), are exactly the whole circuit's: what lets one circuit be synthesised by several processes.
    """
    shape = inst.shape
    root_var = cs.alloc_input(inst.root)
    index_vars = [cs.alloc_input(idx) for idx, _, _ in inst.paths]
    for k in ks:
        idx, leaf, sibs = inst.paths[k]
        cur: LC = [(cs.alloc(leaf), 1)]
        cur_v = leaf
        bits: list[tuple[int, int]] = []
        for level in range(shape.depth):
            tag = f"ch{k}.l{level}"
            bit_v = (idx >> level) & 1
            sib_v = sibs[level]
            sib = cs.alloc(sib_v)
            bit = cs.alloc(bit_v)
            cs.enforce([(bit, 1)], [(bit, 1)], [(bit, 1)], tag + ".bool")
            t_v = bit_v * (sib_v - cur_v) % R
            t = cs.alloc(t_v)
            diff = [(sib, 1)] + [(i, (R - c) % R) for i, c in cur]
            cs.enforce([(bit, 1)], diff, [(t, 1)], tag + ".select")
            left = (list(cur) + [(t, 1)], (cur_v + t_v) % R)
            right = ([(sib, 1), (t, R - 1)], (sib_v - t_v) % R)
            out = poseidon_gadget(cs, [([], 0), left, right], tag + ".h")
            cur, cur_v = out[0]
            bits.append((bit, 1 << level))
        cs.enforce(bits, [(ONE, 1)], [(index_vars[k], 1)], f"ch{k}.index")
        cs.enforce(cur, [(ONE, 1)], [(root_var, 1)], f"ch{k}.root")
