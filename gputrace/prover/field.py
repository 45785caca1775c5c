"""Fr, the BLS12-381 scalar field: constants, conversions, and small helpers.

Elements are Python ints in [0, R) in the pipeline's host code (exact, and fast enough for the
vectorised numpy-object paths we use); arrays handed to backends are ``uint64`` limb arrays of
shape ``(..., 4)`` (little-endian, canonical) — see ``backends/base.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from py_arkworks_bls12381 import Scalar

#: The scalar-field modulus r (order of G1/G2).
R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
#: Fr's multiplicative generator; also the coset shift used by NTTs (as in bellman/arkworks).
GENERATOR = 7
COSET_SHIFT = GENERATOR
#: r - 1 = 2^TWO_ADICITY * odd.
TWO_ADICITY = 32
#: A primitive 2^32-th root of unity: 7^((r-1)/2^32).
ROOT_OF_UNITY_2_32 = pow(GENERATOR, (R - 1) >> TWO_ADICITY, R)

_MASK64 = (1 << 64) - 1


class FieldError(ValueError):
    """A value is not a canonical Fr element (names the value's origin)."""


def inv(x: int) -> int:
    """Multiplicative inverse mod R; raises ZeroDivisionError for 0."""
    x %= R
    if x == 0:
        raise ZeroDivisionError("inverse of 0 in Fr")
    return pow(x, -1, R)


def batch_inv(xs: Sequence[int]) -> list[int]:
    """Montgomery's trick: inverses of all xs with one modular inversion. Raises on a zero."""
    n = len(xs)
    prefix = [1] * (n + 1)
    acc = 1
    for i, x in enumerate(xs):
        if x % R == 0:
            raise ZeroDivisionError(f"inverse of 0 in Fr (index {i})")
        acc = acc * x % R
        prefix[i + 1] = acc
    inv_acc = pow(acc, -1, R)
    out = [0] * n
    for i in range(n - 1, -1, -1):
        out[i] = inv_acc * prefix[i] % R
        inv_acc = inv_acc * xs[i] % R
    return out


def root_of_unity(n: int) -> int:
    """Primitive n-th root of unity for n a power of two, n <= 2^32."""
    if n <= 0 or n & (n - 1) or n > (1 << TWO_ADICITY):
        raise ValueError(f"NTT size must be a power of two <= 2^32, got {n}")
    return pow(ROOT_OF_UNITY_2_32, (1 << TWO_ADICITY) // n, R)


def ints_to_limbs(values: Iterable[int]) -> np.ndarray:
    """Canonical ints (< R) -> ``uint64`` array ``(n, 4)`` of little-endian limbs."""
    vals = list(values)
    buf = b"".join(v.to_bytes(32, "little") for v in vals)
    return np.frombuffer(buf, dtype="<u8").reshape(len(vals), 4).astype(np.uint64, copy=True)


def limbs_to_ints(limbs: np.ndarray) -> list[int]:
    """``uint64`` array ``(n, 4)`` -> list of ints (no reduction; values are canonical by contract)."""
    arr = np.ascontiguousarray(limbs, dtype="<u8").reshape(-1, 4)
    raw = arr.tobytes()
    fb = int.from_bytes
    return [fb(raw[i : i + 32], "little") for i in range(0, len(raw), 32)]


def check_canonical(limbs: np.ndarray, what: str = "scalars") -> None:
    """Raise FieldError if any row of ``limbs`` is >= R (``what`` names the array in the message)."""
    arr = np.asarray(limbs, dtype=np.uint64).reshape(-1, 4)
    rl = [(R >> (64 * i)) & _MASK64 for i in range(4)]
    # Lexicographic compare from the top limb down, vectorised.
    gt = np.zeros(len(arr), dtype=bool)
    eq = np.ones(len(arr), dtype=bool)
    for i in (3, 2, 1, 0):
        col = arr[:, i]
        gt |= eq & (col > np.uint64(rl[i]))
        eq &= col == np.uint64(rl[i])
    bad = np.flatnonzero(gt | eq)
    if bad.size:
        raise FieldError(f"{what}: element {int(bad[0])} is not a canonical Fr value (>= r)")


def to_scalar(x: int) -> Scalar:
    """Python int (any) -> arkworks Scalar, reduced mod R. (``Scalar(int)`` is ~6x slower.)"""
    return Scalar.from_le_bytes((x % R).to_bytes(32, "little"))


def to_scalars(xs: Iterable[int]) -> list[Scalar]:
    """Canonical ints -> arkworks Scalars (no reduction: values must already be < R)."""
    fl = Scalar.from_le_bytes
    return [fl(x.to_bytes(32, "little")) for x in xs]


def limbs_to_scalars(limbs: np.ndarray) -> list[Scalar]:
    """``uint64`` (n, 4) limbs -> arkworks Scalars without going through Python ints."""
    raw = np.ascontiguousarray(limbs, dtype="<u8").tobytes()
    fl = Scalar.from_le_bytes
    return [fl(raw[i : i + 32]) for i in range(0, len(raw), 32)]


def bit_lengths(limbs: np.ndarray) -> np.ndarray:
    """Significant bits of each scalar row of ``limbs`` (0 for zero), as int array."""
    arr = np.asarray(limbs, dtype=np.uint64).reshape(-1, 4)
    out = np.zeros(len(arr), dtype=np.int64)
    for i in range(4):  # the highest non-zero limb wins
        col = arr[:, i]
        out = np.where(col != 0, 64 * i + _u64_bit_length(col), out)
    return out


def _u64_bit_length(col: np.ndarray) -> np.ndarray:
    """Bit length of each uint64: the float64 exponent, corrected where rounding reached the next power of two
    (one pass instead of six shift-and-compare passes: D4 plans a 2^20 MSM's scalars on the host)."""
    _, e = np.frexp(col.astype(np.float64))
    e = np.minimum(e.astype(np.int64), 64)
    over = (e > 0) & ((col >> np.maximum(e - 1, 0).astype(np.uint64)) == 0)
    return np.where(col == 0, 0, e - over)


def popcounts(limbs: np.ndarray) -> np.ndarray:
    """Number of set bits of each scalar row of ``limbs``."""
    arr = np.ascontiguousarray(limbs, dtype="<u8").reshape(-1, 4)
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0: 17x faster than unpacking bits at 2^20 rows
        return np.bitwise_count(arr).sum(axis=1, dtype=np.int64)
    bits = np.unpackbits(arr.view(np.uint8), axis=1)
    return bits.sum(axis=1, dtype=np.int64)
