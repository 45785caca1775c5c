"""Point encodings: standard compressed bytes/hex <-> arkworks points <-> affine limb arrays.

Compressed encoding is the zcash/blst/Ethereum one (48-byte G1, 96-byte G2, big-endian x with the
three flag bits); arkworks' ``to_compressed_bytes`` produces it (checked in tests against the
published generator encodings). Affine limbs are the device layout from ``backends/base.py``:
``uint64`` ``(n, 2, 6)``, canonical little-endian Fq limbs, infinity as x = y = 0.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

#: Fq modulus (the base field of BLS12-381).
Q = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB

G1_COMPRESSED = 48
G2_COMPRESSED = 96


class EncodingError(ValueError):
    """Bytes or hex that do not decode to a valid point; the message names ``where``."""


def g1_to_hex(p: G1Point) -> str:
    return p.to_compressed_bytes().hex()


def g2_to_hex(p: G2Point) -> str:
    return p.to_compressed_bytes().hex()


def _hex_bytes(text: object, size: int, where: str) -> bytes:
    if not isinstance(text, str):
        raise EncodingError(f"{where}: expected a hex string, got {type(text).__name__}")
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise EncodingError(f"{where}: not valid hex ({exc})") from None
    if len(raw) != size:
        raise EncodingError(f"{where}: expected {size} bytes, got {len(raw)}")
    return raw


def g1_from_hex(text: object, where: str = "G1 point") -> G1Point:
    """Decode a compressed G1 hex string with curve and subgroup checks; EncodingError names ``where``."""
    raw = _hex_bytes(text, G1_COMPRESSED, where)
    try:
        return G1Point.from_compressed_bytes(raw)
    except Exception as exc:  # arkworks raises ValueError/Exception with a Rust message
        raise EncodingError(f"{where}: not a valid compressed G1 point ({exc})") from None


def g2_from_hex(text: object, where: str = "G2 point") -> G2Point:
    """Decode a compressed G2 hex string with curve and subgroup checks; EncodingError names ``where``."""
    raw = _hex_bytes(text, G2_COMPRESSED, where)
    try:
        return G2Point.from_compressed_bytes(raw)
    except Exception as exc:
        raise EncodingError(f"{where}: not a valid compressed G2 point ({exc})") from None


def g1_to_affine_limbs(points: Sequence[G1Point]) -> np.ndarray:
    """G1 points -> ``uint64`` ``(n, 2, 6)`` affine limbs (canonical, little-endian; infinity = 0,0)."""
    buf = b"".join(p.to_xy_bytes_le() for p in points)
    return np.frombuffer(buf, dtype="<u8").reshape(len(points), 2, 6).astype(np.uint64, copy=True)


def g1_from_affine_limbs(limbs: np.ndarray, *, check_subgroup: bool = False) -> list[G1Point]:
    """``uint64`` ``(n, 2, 6)`` affine limbs -> G1 points (on-curve check always; subgroup optional).

    Raises EncodingError naming the first bad row.
    """
    arr = np.ascontiguousarray(limbs, dtype="<u8").reshape(-1, 12)
    raw = arr.tobytes()
    dec = G1Point.from_xy_bytes_le if check_subgroup else G1Point.from_xy_bytes_unchecked_le
    out = []
    for i in range(len(arr)):
        chunk = raw[96 * i : 96 * (i + 1)]
        try:
            out.append(dec(chunk))
        except Exception as exc:
            raise EncodingError(f"affine limbs row {i}: not a point on G1 ({exc})") from None
    return out


def g2_to_affine_limbs(points: Sequence[G2Point]) -> np.ndarray:
    """G2 points -> ``uint64`` ``(n, 2, 2, 6)``: [x, y] each Fq2 as (c0, c1), canonical LE limbs."""
    buf = b"".join(p.to_xy_bytes_le() for p in points)
    return np.frombuffer(buf, dtype="<u8").reshape(len(points), 2, 2, 6).astype(np.uint64, copy=True)
