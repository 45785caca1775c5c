#!/usr/bin/env python3
"""Proving-key load: ``np.load`` + ``z[k]`` (the old ``load_pk`` read) against ``keys.load_pk``.

Usage: python3 benchmarks/bench_key_load.py [--gib 1.0] [--repeats 5] [--dir DIR]

Writes a synthetic ``pk.npz`` through ``keys.save_keys`` (a seeded 1x2 test key whose five query blocks are
replaced by rows in the real key's proportions: ``a``, ``b_g1``, ``l``, ``h`` of n 96-byte G1 rows and ``b_g2``
of n 192-byte G2 rows, 576 n bytes in all), reads it once so every timing reads from the page cache, then
times the readers interleaved (old, new, ..., old, new, ...) and prints medians and the ratio to the old read
measured in the same run. ``load_pk`` is timed whole (it also parses ``meta`` and decodes the five fixed
points, < 1 ms); two more rows time ``npz_read.read_npz`` without the CRC-32 check and on one thread. The rows
``load_pk`` returns are checked equal to the old read's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputrace.prover.circuit import validate_shape  # noqa: E402
from gputrace.prover.keygen import keys  # noqa: E402
from gputrace.prover.keygen.cache import get_keys  # noqa: E402
from gputrace.prover.keygen.npz_read import read_npz  # noqa: E402

QUERIES = {"a": 96, "b_g1": 96, "b_g2": 192, "l": 96, "h": 96}


def write_key(directory: Path, nbytes: int) -> Path:
    """A pk.npz of about ``nbytes`` (query rows are a cheap pattern: the bytes do not change the read)."""
    ks = get_keys(validate_shape(1, 2), directory / "cache", seed=1)
    n = max(1, nbytes // sum(QUERIES.values()))
    pattern = np.arange(n * 192, dtype=np.uint8)
    raw = {k: pattern[: n * w].reshape(n, w) for k, w in QUERIES.items()}
    vk, _ = keys.load_vk(ks.vk_path)
    keys.save_keys(directory / "big", dataclasses.replace(ks.pk, raw=raw), vk, "merkle-poseidon-t3", {"seed": 1})
    return directory / "big" / "pk.npz"


def old_read(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="key size in GiB (default 1.0)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None, help="where to write the key (default: a temporary folder)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        path = write_key(Path(tmp), int(a.gib * 2**30))
        size = path.stat().st_size
        path.read_bytes()  # into the page cache
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.1f}, {size / 1e9:.2f} GB pk.npz, median of {a.repeats}")
        readers = {
            "old: np.load + z[k]": old_read,
            "new: keys.load_pk": keys.load_pk,
            "new, no CRC check": lambda p: read_npz(p, verify=False),
            "new, one thread": lambda p: read_npz(p, threads=1),
        }
        times: dict[str, list[float]] = {label: [] for label in readers}
        for _ in range(a.repeats):
            for label, read in readers.items():
                t = time.perf_counter()
                got = read(path)
                times[label].append(time.perf_counter() - t)
                del got
        ref = old_read(path)
        pk = keys.load_pk(path)
        assert pk.raw is not None
        for k in QUERIES:
            assert np.array_equal(pk.raw[k], ref[k]), k
        del ref, pk
    old = statistics.median(times["old: np.load + z[k]"])
    print("| reader                        | median s |   GB/s | vs old |")
    print("|-------------------------------|----------|--------|--------|")
    for label, ts in times.items():
        m = statistics.median(ts)
        print(f"| {label:<29} | {m:8.3f} | {size / m / 1e9:6.2f} | {old / m:5.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
