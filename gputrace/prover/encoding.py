"""Point encodings: standard compressed bytes/hex <-> arkworks points <-> affine limb arrays.

Compressed encoding is the zcash/blst/Ethereum one (48-byte G1, 96-byte G2, big-endian x with the
three flag bits); arkworks' ``to_compressed_bytes`` produces it (checked in tests against the
published generator encodings). Affine limbs are the device layout from ``backends/base.py``:
``uint64`` ``(n, 2, 6)``, canonical little-endian Fq limbs, infinity as x = y = 0.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def check_canonical(raw: bytes, where: str) -> None:
    """The standard BLS12-381 compressed-format rules (zcash ``serialization`` spec; what blst and the
    Ethereum consensus specs enforce), for a 48-byte G1 or 96-byte G2 encoding. arkworks' decoder checks
    the curve and subgroup but accepts some non-canonical inputs (the point at infinity with the sort
    flag or stray bits set), so one point would have many encodings. Raises EncodingError naming ``where``.

    * the compression flag (0x80 of byte 0) is set;
    * infinity (0x40) has the sort flag (0x20) clear and every other bit zero;
    * otherwise every coordinate (x, or x.c1 then x.c0 for G2) is below the field modulus q.
    """
    b0 = raw[0]
    if not b0 & 0x80:
        raise EncodingError(f"{where}: compression flag not set (only compressed points are accepted)")
    if b0 & 0x40:
        if b0 != 0xC0 or any(raw[1:]):
            raise EncodingError(f"{where}: non-canonical encoding of the point at infinity (must be c0 00 .. 00)")
        return
    first = bytes([b0 & 0x1F]) + raw[1:48]
    for i, part in enumerate((first, raw[48:96]) if len(raw) == G2_COMPRESSED else (first,)):
        if int.from_bytes(part, "big") >= Q:
            raise EncodingError(f"{where}: non-canonical encoding (coordinate {i} is not below the field modulus)")


def g1_from_hex(text: object, where: str = "G1 point") -> G1Point:
    """Decode a compressed G1 hex string with canonical-encoding, curve and subgroup checks;
    EncodingError names ``where``."""
    raw = _hex_bytes(text, G1_COMPRESSED, where)
    check_canonical(raw, where)
    try:
        return G1Point.from_compressed_bytes(raw)
    except ValueError as exc:  # arkworks' message (a Rust error) names what is wrong
        raise EncodingError(f"{where}: not a valid compressed G1 point ({exc})") from None


def g2_from_hex(text: object, where: str = "G2 point") -> G2Point:
    """Decode a compressed G2 hex string with canonical-encoding, curve and subgroup checks;
    EncodingError names ``where``."""
    raw = _hex_bytes(text, G2_COMPRESSED, where)
    check_canonical(raw, where)
    try:
        return G2Point.from_compressed_bytes(raw)
    except ValueError as exc:
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
        except ValueError as exc:
            raise EncodingError(f"affine limbs row {i}: not a point on G1 ({exc})") from None
    return out


def g2_to_affine_limbs(points: Sequence[G2Point]) -> np.ndarray:
    """G2 points -> ``uint64`` ``(n, 2, 2, 6)``: [x, y] each Fq2 as (c0, c1), canonical LE limbs."""
    buf = b"".join(p.to_xy_bytes_le() for p in points)
    return np.frombuffer(buf, dtype="<u8").reshape(len(points), 2, 2, 6).astype(np.uint64, copy=True)
