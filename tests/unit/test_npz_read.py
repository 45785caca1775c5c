"""npz_read.read_npz against np.load: the same arrays, stored members read without zipfile, CRC-32 checked."""

import random
import struct
import zipfile
import zlib

import numpy as np
import pytest

from gputrace.prover.keygen import npz_read
from gputrace.prover.keygen.npz_read import crc32_combine, read_npz

ERRORS = (zipfile.BadZipFile, ValueError, EOFError)  # what read_npz may raise for a bad file (keys.load_pk's list)


def _arrays():
    rng = np.random.default_rng(1)
    return {
        "rows": rng.integers(0, 256, (1000, 96), dtype=np.uint8),
        "g2": rng.integers(0, 256, (333, 192), dtype=np.uint8),
        "fortran": np.asfortranarray(rng.integers(0, 256, (50, 96), dtype=np.uint8)),
        "big_endian": np.arange(77, dtype=">f8").reshape(7, 11),
        "scalar": np.array(3.5),
        "empty": np.zeros((0, 96), dtype=np.uint8),
        "record": np.array([(1, 2.0), (3, 4.0)], dtype=[("i", "<i4"), ("x", "<f8")]),
    }


def _data_offset(path, member):
    """Where ``member``'s bytes (its .npy header first) start in ``path``."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
    name_len, extra_len = struct.unpack("<2H", local[26:30])
    return info.header_offset + 30 + name_len + extra_len, info.file_size


def test_crc32_combine_matches_zlib():
    rng = random.Random(2)
    data = rng.randbytes(5000)
    for _ in range(50):
        cut = rng.randrange(len(data) + 1)
        a, b = data[:cut], data[cut:]
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(data)
    assert crc32_combine(zlib.crc32(b"abc"), zlib.crc32(b""), 0) == zlib.crc32(b"abc")


@pytest.mark.parametrize("threads", [1, 3])
def test_stored_members_read_like_np_load_without_zipfile(tmp_path, monkeypatch, threads):
    p = tmp_path / "x.npz"
    np.savez(p, **_arrays())
    with np.load(p) as z:
        want = {k: z[k] for k in z.files}
    monkeypatch.setattr(npz_read, "PIECE", 4096)  # many pieces per member, each member split across threads

    def no_zipfile_read(*args, **kwargs):
        raise AssertionError("a stored member went through zipfile")

    monkeypatch.setattr(zipfile.ZipFile, "open", no_zipfile_read)
    got = read_npz(p, threads=threads)
    assert list(got) == list(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        assert np.array_equal(got[k], v), k
    assert got["fortran"].flags.f_contiguous and not got["fortran"].flags.c_contiguous


def test_compressed_members_take_the_generic_path(tmp_path):
    p = tmp_path / "x.npz"
    np.savez_compressed(p, **_arrays())
    got = read_npz(p)
    with np.load(p) as z:
        for k in z.files:
            assert np.array_equal(got[k], z[k]), k


@pytest.mark.parametrize("member", ["rows.npy", "g2.npy"])
def test_a_flipped_byte_fails_the_crc_check_naming_the_member(tmp_path, monkeypatch, member):
    p = tmp_path / "x.npz"
    np.savez(p, **_arrays())
    monkeypatch.setattr(npz_read, "PIECE", 4096)
    start, size = _data_offset(p, member)
    raw = bytearray(p.read_bytes())
    raw[start + size - 100] ^= 0x01  # in the last piece of the member's data
    p.write_bytes(bytes(raw))
    with pytest.raises(zipfile.BadZipFile, match=f"CRC-32 for file '{member}'"):
        read_npz(p)
    assert not np.array_equal(read_npz(p, verify=False)[member[:-4]], _arrays()[member[:-4]])


def test_a_flipped_byte_in_the_npy_header_is_caught(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, **_arrays())
    start, _ = _data_offset(p, "rows.npy")
    raw = bytearray(p.read_bytes())
    header = bytes(raw[start:start + 128])
    i = header.index(b"(1000, 96)") + 1
    raw[start + i] = ord("2")  # (2000, 96): sizes no longer add up, so zipfile's path reads it and fails
    p.write_bytes(bytes(raw))
    with pytest.raises(ERRORS):
        read_npz(p)


def test_truncated_files_raise(tmp_path):
    src = tmp_path / "x.npz"
    np.savez(src, **_arrays())
    raw = src.read_bytes()
    p = tmp_path / "cut.npz"
    for cut in [0, 10, len(raw) // 3, len(raw) // 2, len(raw) - 100, len(raw) - 1]:
        p.write_bytes(raw[:cut])
        with pytest.raises(ERRORS):
            read_npz(p)


def test_data_missing_under_an_intact_directory_names_the_member(tmp_path):
    """A directory that claims more data than the file holds (a copy cut short and its directory rewritten, or a
    foreign writer's bug): an error naming the member, not a short or garbage array."""
    p = tmp_path / "x.npz"
    np.savez(p, rows=_arrays()["rows"])
    raw = p.read_bytes()
    cd = raw.index(b"PK\x01\x02")  # the central directory entry: compressed and uncompressed sizes at +20, +24
    size = struct.unpack("<L", raw[cd + 24:cd + 28])[0] + len(raw)
    p.write_bytes(raw[:cd + 20] + struct.pack("<2L", size, size) + raw[cd + 28:])
    with pytest.raises(ValueError, match="member 'rows.npy': the file ends"):
        read_npz(p)


def test_object_arrays_are_refused_like_np_load(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, obj=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        read_npz(p)
