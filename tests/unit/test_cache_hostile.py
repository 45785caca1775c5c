"""The columnar cache never serves stale or damaged data (issue 26): a file rewritten at the same size with its
old modification time restored is a miss; any damage to an entry (a flipped bit anywhere, truncation, absurd
lengths, a FIFO or a directory at the entry's path) is a miss, never a traceback, a hang, an out-of-memory or
wrong data; entries whose trace is gone are dropped when the next entry is stored."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from gputrace.timeline import cache
from gputrace.timeline.load import read_any
from tests.unit.timeline_equality import assert_same_timeline

DATA = os.path.join(os.path.dirname(__file__), "..", "data")



def _stored(tmp_path, name="sample_2gpu.jsonl"):
    p = tmp_path / name
    shutil.copyfile(os.path.join(DATA, name), p)
    tl = read_any([p])
    (entry,) = (tmp_path / "cache").glob("*.gtc")
    return p, tl, entry


def _swap_two_spans(data: bytes) -> bytes:
    """Same size, other content: two lines exchanged."""
    lines = data.split(b"\n")
    lines[0], lines[1] = lines[1], lines[0]
    return b"\n".join(lines)


def test_rewritten_same_size_with_old_mtime_is_a_miss(tmp_path, small_cache):
    p, first, _ = _stored(tmp_path)
    st = os.stat(p)
    other = tmp_path / "other.jsonl"
    other.write_bytes(_swap_two_spans(p.read_bytes()))
    shutil.copyfile(other, p)  # as `cp --preserve=timestamps` does: same size, old times restored
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size and os.stat(p).st_mtime_ns == st.st_mtime_ns
    assert cache.load(p) is None
    assert_same_timeline(read_any([p]), read_any([other]))


def test_content_fingerprint_alone_catches_a_change(tmp_path, small_cache, monkeypatch):
    # Even where size, times, inode and device all match (a file system with coarse or frozen times),
    # the content fingerprint differs.
    p, _, _ = _stored(tmp_path)
    key = cache.source_key(p)
    data = p.read_bytes()
    p.write_bytes(_swap_two_spans(data))
    real = cache.source_key
    monkeypatch.setattr(cache, "source_key",
                        lambda path: {**real(path), **{k: key[k] for k in ("mtime_ns", "ctime_ns", "ino", "dev")}})
    assert cache.load(p) is None


def test_big_files_are_fingerprinted_by_samples(tmp_path):
    p = tmp_path / "big.bin"
    data = bytearray(os.urandom(8 << 20))
    p.write_bytes(data)
    k0 = cache.source_key(p)["content"]
    data[-1] ^= 1  # the last byte
    p.write_bytes(data)
    k1 = cache.source_key(p)["content"]
    data[cache.EDGE_BYTES + ((len(data) - 2 * cache.EDGE_BYTES - cache.SAMPLE_BYTES) // (2 * cache.SAMPLES))] ^= 1
    p.write_bytes(data)
    k2 = cache.source_key(p)["content"]
    assert len({k0, k1, k2}) == 3


def test_every_flipped_bit_is_a_miss(tmp_path, small_cache):
    p, first, entry = _stored(tmp_path)
    good = entry.read_bytes()
    assert_same_timeline(cache.load(p), first)
    rng = np.random.default_rng(3)
    positions = sorted(set(rng.integers(0, len(good), 300).tolist()) | set(range(0, 64)) | {len(good) - 1})
    for pos in positions:
        bad = bytearray(good)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        entry.write_bytes(bytes(bad))
        assert cache.load(p, lenient=True) is None, pos
    entry.write_bytes(good)
    assert_same_timeline(cache.load(p), first)


def test_truncated_and_extended_entries_are_misses(tmp_path, small_cache):
    p, _, entry = _stored(tmp_path)
    good = entry.read_bytes()
    for n in (0, 1, 7, 8, 12, 40, len(good) // 2, len(good) - 1):
        entry.write_bytes(good[:n])
        assert cache.load(p) is None, n
    entry.write_bytes(good + b"\0")
    assert cache.load(p) is None


@pytest.mark.timeout(20)
def test_absurd_lengths_allocate_nothing(tmp_path, small_cache):
    p, _, entry = _stored(tmp_path)
    good = bytearray(entry.read_bytes())
    plen = int.from_bytes(good[8:12], "little")
    at = 12 + plen  # the header length (u64)
    for value in (2**63 - 1, 2**40, len(good)):
        bad = bytearray(good)
        bad[at:at + 8] = value.to_bytes(8, "little")
        entry.write_bytes(bytes(bad))
        assert cache.load(p) is None
    bad = bytearray(good)
    bad[8:12] = (2**32 - 1).to_bytes(4, "little")  # the path length
    entry.write_bytes(bytes(bad))
    assert cache.load(p) is None


@pytest.mark.timeout(20)
def test_a_fifo_or_a_directory_at_the_entry_path_is_a_miss(tmp_path, small_cache):
    p, first, entry = _stored(tmp_path)
    entry.unlink()
    os.mkfifo(entry)  # opening it for reading would wait for a writer
    assert cache.load(p) is None
    assert_same_timeline(read_any([p]), first)  # and the read stores a good entry over it
    assert cache.load(p) is not None
    entry.unlink()
    entry.mkdir()
    assert cache.load(p) is None
    os.rmdir(entry)
    target = tmp_path / "elsewhere.gtc"
    target.write_bytes(b"x")
    entry.symlink_to(target)
    assert cache.load(p) is None


def test_entries_of_deleted_traces_are_dropped_on_the_next_store(tmp_path, small_cache):
    p, _, entry = _stored(tmp_path)
    (small_cache / "0123.gtc").write_bytes(b"GPUTRC1\ngarbage")  # an older format's entry
    p.unlink()
    q = tmp_path / "again.jsonl"
    shutil.copyfile(os.path.join(DATA, "sample_2gpu.jsonl"), q)
    read_any([q])
    left = sorted(x.name for x in small_cache.iterdir())
    assert left == [cache._entry(os.path.abspath(q)).name]
    assert cache.prune(small_cache) == 0
