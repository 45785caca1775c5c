"""Poseidon over the BLS12-381 scalar field: width 3, x^5 S-box, 8 full + 57 partial rounds.

Parameters are the Poseidon paper's instance ``poseidonperm_x5_255_3`` (hadeshash reference,
128-bit security at t = 3 over a 255-bit prime): alpha = 5, R_F = 8, R_P = 57.

Constants are generated here, not pasted: the Grain LFSR of the paper's reference script
``generate_parameters_grain.sage`` (80-bit state seeded with field type 1 (2 bits), S-box type 0
(4 bits), n = 255 (12 bits), t = 3 (12 bits), R_F (10 bits), R_P (10 bits), thirty 1 bits;
160 warm-up clocks; output by the self-shrinking rule). Round constants are n-bit draws with
rejection of values >= r; the MDS matrix is the Cauchy matrix M[i][j] = 1/(x_i + y_j) whose
x, y are the next 2t draws from the same stream (reduced mod r, redrawn on duplicates).

Checked against the published known-answer vector (hadeshash ``test_vectors.txt``,
poseidonperm_x5_255_3): permutation([0, 1, 2]) = [0x28ce1942..., 0x51f3e312..., 0x3b2b6913...];
see tests/unit/test_poseidon.py. Note: this is *not* Filecoin's neptune instance (R_P = 55,
different MDS and domain tags), so digests differ from Filecoin's.

The 2-to-1 hash used by the Merkle circuit is ``hash2(l, r) = permute([0, l, r])[0]``
(capacity element 0 in lane 0, digest in lane 0, as circomlib does).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache

from .field import R

WIDTH = 3
ALPHA = 5
FULL_ROUNDS = 8
PARTIAL_ROUNDS = 57
FIELD_BITS = 255


def _grain_bits(field: int, sbox: int, n: int, t: int, r_f: int, r_p: int) -> Iterator[int]:
    """The paper's Grain LFSR bit stream (self-shrinking output), as in the reference script."""
    init = (
        [int(b) for b in format(field, "02b")]
        + [int(b) for b in format(sbox, "04b")]
        + [int(b) for b in format(n, "012b")]
        + [int(b) for b in format(t, "012b")]
        + [int(b) for b in format(r_f, "010b")]
        + [int(b) for b in format(r_p, "010b")]
        + [1] * 30
    )
    state = init  # 80 bits; taps 62, 51, 38, 23, 13, 0

    def clock() -> int:
        nb = state[62] ^ state[51] ^ state[38] ^ state[23] ^ state[13] ^ state[0]
        state.pop(0)
        state.append(nb)
        return nb

    for _ in range(160):
        clock()
    while True:
        nb = clock()
        while nb == 0:
            clock()
            nb = clock()
        yield clock()


def _draw(bits: Iterator[int], n: int) -> int:
    v = 0
    for _ in range(n):
        v = (v << 1) | next(bits)
    return v


@cache
def constants() -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """(round constants, flat, (R_F + R_P)·t of them; MDS matrix t×t), generated once and cached."""
    bits = _grain_bits(1, 0, FIELD_BITS, WIDTH, FULL_ROUNDS, PARTIAL_ROUNDS)
    rcs = []
    for _ in range((FULL_ROUNDS + PARTIAL_ROUNDS) * WIDTH):
        v = _draw(bits, FIELD_BITS)
        while v >= R:
            v = _draw(bits, FIELD_BITS)
        rcs.append(v)
    while True:
        xy = [_draw(bits, FIELD_BITS) % R for _ in range(2 * WIDTH)]
        if len(set(xy)) != len(xy):
            continue
        xs, ys = xy[:WIDTH], xy[WIDTH:]
        if any((x + y) % R == 0 for x in xs for y in ys):
            continue
        mds = tuple(tuple(pow(x + y, -1, R) for y in ys) for x in xs)
        return tuple(rcs), mds


def permute(state: Sequence[int]) -> list[int]:
    """The Poseidon permutation of a width-3 state of Fr ints (returns a new list)."""
    if len(state) != WIDTH:
        raise ValueError(f"Poseidon state must have {WIDTH} elements, got {len(state)}")
    rcs, mds = constants()
    s = [x % R for x in state]
    half = FULL_ROUNDS // 2
    k = 0
    for rnd in range(FULL_ROUNDS + PARTIAL_ROUNDS):
        s = [(s[i] + rcs[k + i]) % R for i in range(WIDTH)]
        k += WIDTH
        if rnd < half or rnd >= half + PARTIAL_ROUNDS:
            s = [pow(x, ALPHA, R) for x in s]
        else:
            s[0] = pow(s[0], ALPHA, R)
        s = [sum(mds[i][j] * s[j] for j in range(WIDTH)) % R for i in range(WIDTH)]
    return s


def hash2(left: int, right: int) -> int:
    """2-to-1 compression for Merkle nodes: permute([0, left, right])[0]."""
    return permute([0, left, right])[0]
