"""Find or generate the Groth16 keys for a circuit shape (the key cache).

Keys live in ``<key_dir>/<circuit-id>-K<k>-D<d>-<fingerprint16>/`` (see ``keys.py``). The R1CS
fingerprint is taken from a template synthesis of the shape; a cached key with another
fingerprint is never used (``keys.load_pk`` raises ``KeyMismatchError``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import gputrace

from . import keys
from .circuit import CIRCUIT_ID, CircuitShape, make_instance
from .setup import ProvingKey, generate
from .witness import build_cs


@dataclass
class KeySet:
    pk: ProvingKey
    vk_path: Path
    directory: Path
    cached: bool
    seconds: float
    fingerprint: str


def get_keys(shape: CircuitShape, key_dir: Path, seed: int, workers: int | None = None) -> KeySet:
    """Load the shape's keys from ``key_dir`` or generate and save them (seeded; tests only)."""
    t0 = time.perf_counter()
    with gputrace.phase("setup_fingerprint", kind="host"):
        cs = build_cs(shape, make_instance(shape, seed=-1), frozenset({"a1"}))
        fp = cs.fingerprint()
    directory = keys.cache_dir_for(key_dir, CIRCUIT_ID, shape.label(), fp)
    pk_path = directory / "pk.npz"
    if pk_path.exists() and (directory / "vk.json").exists():
        with gputrace.phase("key_load", kind="host"):
            pk = keys.load_pk(pk_path, expect_fingerprint=fp)
        return KeySet(pk, directory / "vk.json", directory, True, time.perf_counter() - t0, fp)
    pk, vk = generate(cs, seed, workers)
    meta = {"challenges": shape.challenges, "depth": shape.depth, "seed": seed,
            "constraints": cs.num_constraints, "warning": "seeded test key, not a ceremony"}
    with gputrace.phase("key_save", kind="host"):
        keys.save_keys(directory, pk, vk, CIRCUIT_ID, meta)
    return KeySet(pk, directory / "vk.json", directory, False, time.perf_counter() - t0, fp)
