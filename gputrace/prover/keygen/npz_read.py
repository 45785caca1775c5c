"""Read an ``.npz`` (as ``np.savez`` writes it) at close to page-cache copy speed.

``np.load(path)[k]`` reads a zip member, which is not a real file, in 256 KiB pieces through ``zipfile``
(a CRC-32 per piece, then a copy of each piece into the array): ~1.2 GB/s for a 2^22 proving key (2.4 GB) on
the H200 machine. ``read_npz`` reads each stored (uncompressed) ``.npy`` member with ``os.preadv`` straight
into its array, in pieces spread over a few threads; each thread also computes its piece's CRC-32
(``zlib.crc32`` and ``preadv`` release the GIL), and the pieces' CRCs are combined and checked against the
zip directory's, as ``zipfile`` does. Any other member (compressed, an ``.npy`` version or dtype this path
does not take, sizes that do not add up, no ``os.preadv``) is read the generic way, through ``zipfile`` and
``numpy.lib.format.read_array``, so it gives what ``np.load`` gives, and the same errors.

The CRC-32 check is kept, by choice: ``zlib.crc32`` runs at ~7 GB/s a core, so on the 2-core CI box it
takes about as long as the read itself (1.07 GB: ~0.07-0.10 s without it, ~0.14-0.25 s with it; the
``verify=False`` row of ``benchmarks/bench_key_load.py``, benchmarks/RESULTS.md "Proving-key load (issue 25)"),
and with 8 threads on the 16-core H200 host it should be ~0.04 s for a 2.4 GB key. The old read checked it
too, and without it a flipped byte in a cached key reaches the GPU as a wrong base and shows only as a proof
that does not verify.
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

PIECE = 64 << 20  #: bytes one thread reads and checks at a time
BLOCK = 1 << 20  #: bytes read by one preadv, then checked while still in the cache
MAX_THREADS = 8

_LOCAL = struct.Struct("<4s2B4HL2L2H")  # a zip local file header (zipfile.structFileHeader)
_LOCAL_MAGIC = b"PK\003\004"
_HEADER_READERS: dict[tuple[int, int], Callable] = {
    (1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0,
}


@dataclass
class _Member:
    name: str  # the zip member's name
    crc: int  # CRC-32 of the member (the .npy header and the data), from the zip directory
    header: bytes  # the .npy header as stored
    data_offset: int  # where the array data starts in the file
    buf: np.ndarray  # uint8, the array's bytes (filled by the read)
    array: np.ndarray  # a view of buf with the stored dtype, shape and order


def read_npz(path: Path | str, verify: bool = True, threads: int | None = None) -> dict[str, np.ndarray]:
    """Every ``.npy`` member of ``path`` by name without ``.npy`` (other members are skipped), like
    ``{k: z[k] for k in np.load(path).files}`` with ``allow_pickle=False``.

    ``verify``: check each member's CRC-32 (as ``zipfile`` does). ``threads``: readers for the stored members
    (default ``min(8, os.cpu_count())``). Runs on the caller's thread plus a short-lived pool.

    Raises ``zipfile.BadZipFile`` (not a zip, a bad local header, a CRC mismatch: the message names the
    member), ``ValueError`` (a malformed ``.npy``, an object array, data shorter than the directory says,
    naming the member), ``EOFError`` (a member cut short, from ``zipfile``), ``OSError``."""
    out: dict[str, np.ndarray] = {}
    with open(path, "rb") as f, zipfile.ZipFile(f) as zf:
        size = os.fstat(f.fileno()).st_size
        fast: list[_Member] = []
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            m = _stored_member(f, info, size) if hasattr(os, "preadv") else None
            if m is None:
                with zf.open(info) as fp:
                    out[info.filename[:-4]] = npy.read_array(fp, allow_pickle=False)
            else:
                fast.append(m)
                out[info.filename[:-4]] = m.array
        _read_members(f.fileno(), fast, verify, threads)
    return out


def _stored_member(f, info: zipfile.ZipInfo, size: int) -> _Member | None:
    """The member's .npy header and a preallocated array, or None for the generic path."""
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1 or info.compress_size != info.file_size:
        return None
    f.seek(info.header_offset)
    local = f.read(_LOCAL.size)
    if len(local) != _LOCAL.size or _LOCAL.unpack(local)[0] != _LOCAL_MAGIC:
        raise zipfile.BadZipFile(f"Bad magic number for file header of {info.filename!r}")
    fields = _LOCAL.unpack(local)
    name_len, extra_len = fields[10], fields[11]
    start = info.header_offset + _LOCAL.size + name_len + extra_len
    if start + info.file_size > size:
        raise ValueError(f"member {info.filename!r}: the file ends {start + info.file_size - size} bytes "
                         "before its data does (a truncated copy?)")
    f.seek(start)
    try:
        reader = _HEADER_READERS.get(npy.read_magic(f))
        if reader is None:
            return None
        shape, fortran, dtype = reader(f)
    except ValueError:
        return None  # the generic path raises numpy's own error for it
    header_len = f.tell() - start
    count = math.prod(shape)  # exact (a crafted shape cannot wrap around to the member's size)
    if dtype.hasobject or dtype.itemsize == 0 or header_len + count * dtype.itemsize != info.file_size:
        return None
    f.seek(start)
    header = f.read(header_len)
    buf = np.empty(count * dtype.itemsize, dtype=np.uint8)
    array = buf.view(dtype).reshape(shape, order="F" if fortran else "C")
    return _Member(info.filename, info.CRC, header, start + header_len, buf, array)


def _read_members(fd: int, members: list[_Member], verify: bool, threads: int | None) -> None:
    pieces = [(m, lo, min(lo + PIECE, m.buf.nbytes)) for m in members for lo in range(0, m.buf.nbytes, PIECE)]

    def read_piece(piece: tuple[_Member, int, int]) -> int:
        m, lo, hi = piece
        view = m.buf.data
        crc = 0
        for at in range(lo, hi, BLOCK):  # the CRC reads each block while it is still in the cache
            block = view[at:min(at + BLOCK, hi)]
            done = 0
            while done < len(block):  # preadv may return less than asked
                n = os.preadv(fd, [block[done:]], m.data_offset + at + done)
                if n == 0:
                    raise ValueError(f"member {m.name!r}: the file ended inside its data")
                done += n
            if verify:
                crc = zlib.crc32(block, crc)
        return crc

    workers = min(len(pieces), threads or min(MAX_THREADS, os.cpu_count() or 1))
    if sum(m.buf.nbytes for m in members) < PIECE:
        workers = 1  # a small key: no pool to start
    if workers <= 1:  # also no pieces: empty arrays still have their headers checked
        crcs = [read_piece(p) for p in pieces]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="npz-read") as pool:
            crcs = list(pool.map(read_piece, pieces))
    if not verify:
        return
    crc_of = {id(m): zlib.crc32(m.header) for m in members}
    for (m, lo, hi), crc in zip(pieces, crcs, strict=True):
        crc_of[id(m)] = crc32_combine(crc_of[id(m)], crc, hi - lo)
    for m in members:
        if crc_of[id(m)] != m.crc:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {m.name!r}")


# CRC-32 of a concatenation from the parts' CRCs (zlib's crc32_combine, which Python's zlib does not expose):
# polynomial arithmetic modulo the reflected CRC-32 polynomial, as in zlib 1.2.12's crc32.c.
_POLY = 0xEDB88320


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the CRC polynomial (reflected: bit 31 is x^0)."""
    m, p = 1 << 31, 0
    while m:
        if a & m:
            p ^= b
            if not a & (m - 1):
                break
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


def _x2n_table() -> list[int]:
    p, table = 1 << 30, []  # x^1
    for _ in range(32):
        table.append(p)
        p = _multmodp(p, p)
    return table


_X2N = _x2n_table()  # x^(2^k) modulo the polynomial


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """``zlib.crc32(a + b)`` from ``crc1 = zlib.crc32(a)``, ``crc2 = zlib.crc32(b)`` and ``len2 = len(b)``."""
    p, k, n = 1 << 31, 3, len2  # x^0; x^(8 * len2) = x^(len2 * 2^3)
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc1) ^ crc2
