"""Find or generate the Groth16 keys for a circuit shape (the key cache).

Keys live in ``<key_dir>/<circuit-id>-K<k>-D<d>-<fingerprint16>/`` (see ``keys.py``); TEST keys made
from a seed in ``...-<fingerprint16>-testseed<N>/``, so a seeded key is never picked up by a run that
asked for a real one (and a directory written by an older gputrace, whose keys were all seeded, is
regenerated with fresh randomness when a real key is asked for). The R1CS fingerprint is taken from a
template synthesis of the shape; a cached key with another fingerprint is never used
(``keys.load_pk`` raises ``KeyMismatchError``).

The template synthesis is skipped when ``<key_dir>/fingerprints/`` holds a record of the fingerprint
for this shape and the current source of the circuit modules (``fingerprint_record.py``); the
``setup_fingerprint`` phase says which with its ``fingerprint.record`` attribute: ``hit`` (fingerprint
read from a record, no synthesis) or ``miss`` (R1CS built: no usable record, or no cached key to load).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gputrace

from ..backends.base import BackendUnavailable
from ..circuit import CIRCUIT_ID, CircuitShape
from ..r1cs import ConstraintSystem
from . import fingerprint_record, keys, template
from .block import BlockTemplate, block_template
from .setup import ProvingKey, generate, generate_device


@dataclass
class KeySet:
    pk: ProvingKey
    vk_path: Path
    directory: Path
    cached: bool
    seconds: float
    fingerprint: str
    test_seed: int | None = None  # the seed of a TEST key (anyone can forge proofs for it), else None


def _have_keys(directory: Path, seed: int | None = None) -> bool:
    """Both key files exist, and a real key (``seed`` None) was not made from a seed (older caches)."""
    if not ((directory / "pk.npz").exists() and (directory / "vk.json").exists()):
        return False
    if seed is None:
        try:
            doc = json.loads((directory / "vk.json").read_text())
        except (OSError, ValueError, RecursionError):
            return True  # load_vk/load_pk will name the problem
        return isinstance(doc, dict) and doc.get("test_key") is False
    return True


def key_directory(key_dir: Path, shape: CircuitShape, fingerprint: str, seed: int | None) -> Path:
    """Where the shape's keys are cached: a separate directory per test-key seed."""
    d = keys.cache_dir_for(key_dir, CIRCUIT_ID, shape.label(), fingerprint)
    return d if seed is None else d.with_name(f"{d.name}-testseed{seed}")


KEYGEN = ("auto", "host", "device")
#: What keys are generated from: the template R1CS (host) or the circuit's block and its ``QapGpu`` (device).
_Built = ConstraintSystem | tuple[BlockTemplate, Any]


def resolve_keygen(keygen: str) -> str:
    """``"host"`` or ``"device"`` for a ``keygen`` choice: ``auto`` is the device when CuPy sees a CUDA device.

    Raises ValueError for an unknown choice, ``BackendUnavailable`` for ``device`` without CuPy or a device."""
    if keygen not in KEYGEN:
        raise ValueError(f"--keygen: expected one of {', '.join(KEYGEN)}, got {keygen!r}")
    if keygen == "host":
        return "host"
    try:
        from ..backends import cuda_fixed_base  # lazy: imports CuPy

        ok, why = cuda_fixed_base.device_available(), "no CUDA device"
    except ImportError as exc:
        ok, why = False, f"CuPy unavailable ({exc})"
    if ok:
        return "device"
    if keygen == "device":
        raise BackendUnavailable(f"--keygen device: {why}")
    return "host"


def get_keys(shape: CircuitShape, key_dir: Path, seed: int | None = None, workers: int | None = None,
             keygen: str = "auto") -> KeySet:
    """Load the shape's keys from ``key_dir`` or generate and save them: from fresh randomness by
    default, or from ``seed`` (a reproducible TEST key: anyone who knows the seed can forge proofs).

    ``keygen`` says where missing keys are made (``resolve_keygen``): ``host`` (the built R1CS in
    Python, fixed-base multiples on ``workers`` processes) or ``device`` (the circuit's block and a CUDA
    device, ``setup.generate_device``); both give the same bytes. The ``setup_fingerprint`` phase records
    the choice as ``keygen``.

    Raises ``keys.KeyMismatchError`` when the cached key belongs to another circuit, ``keys.KeyError_``
    when it is unreadable. Writes a fingerprint record under ``key_dir`` after a template synthesis
    (best effort: an unwritable directory only costs the synthesis next time).
    """
    t0 = time.perf_counter()
    where = resolve_keygen(keygen)
    built: _Built | None = None
    with gputrace.phase("setup_fingerprint", kind="host", keygen=where) as p:
        rkey = fingerprint_record.record_key(CIRCUIT_ID, shape.challenges, shape.depth, template.TEMPLATE_SEED,
                                             template.TEMPLATE_OPTS)
        recorded = fingerprint_record.read(key_dir, rkey) if rkey is not None else None
        if recorded is not None and _have_keys(key_directory(key_dir, shape, recorded, seed), seed):
            fp = recorded
        else:
            built, fp = _template(shape, where)  # no record, or keys to generate (which needs the R1CS anyway)
            if recorded is not None and recorded != fp:
                fingerprint_record.log.warning(
                    "fingerprint record for %s was stale (%s, built %s): a circuit dependency is missing "
                    "from fingerprint_record.SOURCE_MODULES", shape.label(), recorded[:16], fp[:16])
            if rkey is not None and recorded != fp:
                fingerprint_record.write(key_dir, rkey, fp)
        p.set("fingerprint.record", "miss" if built is not None else "hit")
    directory = key_directory(key_dir, shape, fp, seed)
    pk_path = directory / "pk.npz"
    if _have_keys(directory, seed):
        with gputrace.phase("key_load", kind="host") as p:
            pk, source = _load_resident(pk_path, fp)
            p.set("key.source", source)
        return KeySet(pk, directory / "vk.json", directory, True, time.perf_counter() - t0, fp, seed)
    if built is None:  # the keys went away between the check above and here
        built, fp = _template(shape, where)
        directory = key_directory(key_dir, shape, fp, seed)
    if isinstance(built, ConstraintSystem):
        pk, vk = generate(built, seed, workers)
    else:
        block, qap = built
        pk, vk = generate_device(block, fp, seed, qap=qap)
    meta = {"challenges": shape.challenges, "depth": shape.depth, "seed": seed, "constraints": shape.constraints,
            "warning": keys.seeded_key_warning(seed) if seed is not None
            else "single-party setup from fresh randomness"}
    with gputrace.phase("key_save", kind="host"):
        keys.save_keys(directory, pk, vk, CIRCUIT_ID, meta)
    return KeySet(pk, directory / "vk.json", directory, False, time.perf_counter() - t0, fp, seed)


#: The last proving key read from a file, kept for the next prove of the same process (``gputrace ab`` proves
#: many times in one process; a prover service keeps its keys resident the same way). One entry, so a process
#: never holds two keys' memory: ``str(pk path) -> (file signature, ProvingKey)``. Guarded by ``_RESIDENT_LOCK``.
_RESIDENT: dict[str, tuple[tuple[int, int, int, int], ProvingKey]] = {}
_RESIDENT_LOCK = threading.Lock()


def _load_resident(pk_path: Path, fingerprint: str) -> tuple[ProvingKey, str]:
    """(key, ``"memory"`` or ``"file"``): the resident key when ``pk_path`` is the file it was read from, unchanged
    (device, inode, size and mtime) and of ``fingerprint``; else read (``keys.load_pk``, whose errors propagate)
    and kept in its place. The key is never mutated after loading, so sharing it between proves is safe."""
    st = pk_path.stat()
    sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _RESIDENT_LOCK:
        hit = _RESIDENT.get(str(pk_path))
        if hit is not None and hit[0] == sig and hit[1].fingerprint == fingerprint:
            return hit[1], "memory"
        _RESIDENT.clear()  # release the old key before reading the new one
        pk = keys.load_pk(pk_path, expect_fingerprint=fingerprint)
        _RESIDENT[str(pk_path)] = (sig, pk)
        return pk, "file"


def drop_resident() -> None:
    """Forget the resident key (tests; a caller that needs the memory back)."""
    with _RESIDENT_LOCK:
        _RESIDENT.clear()


def _template(shape: CircuitShape, where: str) -> tuple[_Built, str]:
    """(template, fingerprint): the whole template R1CS on the host; on the device the circuit's block
    (``block``) and its ``QapGpu``, the fingerprint computed from them on the GPU."""
    if where == "device":
        from ..backends import cuda_fixed_base  # lazy: imports CuPy

        block = block_template(shape)
        qap = cuda_fixed_base.QapGpu(block, 0)
        return (block, qap), cuda_fixed_base.fingerprint(qap)
    cs = template.template_cs(shape)
    return cs, cs.fingerprint()
