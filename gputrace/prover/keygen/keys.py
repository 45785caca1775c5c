"""Key files and the key cache.

Layout of one cached key (a directory ``<key_dir>/<circuit-id>-<shape>-<fingerprint16>/``):

* ``vk.json`` — ``alpha_g1``, ``beta_g2``, ``gamma_g2``, ``delta_g2`` (compressed hex), ``ic`` (list),
  plus ``circuit``, ``fingerprint`` and ``num_inputs`` for error messages.
* ``pk.npz`` — every query as ``uint8`` rows of little-endian affine ``xy`` encodings (96 bytes G1,
  192 bytes G2; identity = zeros), the fixed elements, and ``meta`` (JSON: fingerprint, sizes, seed).

Keys are found by circuit shape and checked against the R1CS fingerprint; a key whose fingerprint
differs from the circuit's is ``KeyMismatchError`` (never silently used).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from gputrace.atomic_write import atomic_output, write_atomic

from .. import fixed_base
from ..encoding import EncodingError, g1_from_hex, g1_to_hex, g2_from_hex, g2_to_hex
from .npz_read import read_npz
from .setup import ProvingKey, VerifyingKey

KEY_FORMAT = 1


class KeyError_(ValueError):
    """A key file is unreadable or malformed (names the file and the field)."""


class KeyMismatchError(ValueError):
    """A key does not belong to this circuit (fingerprint or input count differs)."""


def seeded_key_warning(seed: int) -> str:
    return (f"TEST KEY: its toxic waste is derived from --seed {seed}, so anyone can forge proofs that "
            "verify against it; never use it outside tests and benchmarks")


def vk_to_json(vk: VerifyingKey, circuit: str, fingerprint: str, test_seed: int | None = None) -> dict:
    """The ``vk.json`` document. ``test_seed``: the key came from a seed (``test_key`` true, with a warning)."""
    doc = {
        "protocol": "groth16",
        "curve": "bls12-381",
        "circuit": circuit,
        "fingerprint": fingerprint,
        "test_key": test_seed is not None,
    }
    if test_seed is not None:
        doc["test_key_seed"] = test_seed
        doc["warning"] = seeded_key_warning(test_seed)
    return doc | {
        "num_inputs": len(vk.ic) - 1,
        "alpha_g1": g1_to_hex(vk.alpha_g1),
        "beta_g2": g2_to_hex(vk.beta_g2),
        "gamma_g2": g2_to_hex(vk.gamma_g2),
        "delta_g2": g2_to_hex(vk.delta_g2),
        "ic": [g1_to_hex(p) for p in vk.ic],
    }


def load_vk(path: Path) -> tuple[VerifyingKey, dict]:
    """Read ``vk.json``; raises KeyError_ naming the file and field on any problem."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise KeyError_(f"{path}: cannot read verifying key ({exc})") from None
    if not isinstance(doc, dict):
        raise KeyError_(f"{path}: verifying key must be a JSON object")
    try:
        for f in ("alpha_g1", "beta_g2", "gamma_g2", "delta_g2", "ic"):
            if f not in doc:
                raise KeyError_(f"{path}: missing field {f!r}")
        if not isinstance(doc["ic"], list) or not doc["ic"]:
            raise KeyError_(f"{path}: field 'ic' must be a non-empty list")
        vk = VerifyingKey(
            alpha_g1=g1_from_hex(doc["alpha_g1"], f"{path}: alpha_g1"),
            beta_g2=g2_from_hex(doc["beta_g2"], f"{path}: beta_g2"),
            gamma_g2=g2_from_hex(doc["gamma_g2"], f"{path}: gamma_g2"),
            delta_g2=g2_from_hex(doc["delta_g2"], f"{path}: delta_g2"),
            ic=[g1_from_hex(x, f"{path}: ic[{i}]") for i, x in enumerate(doc["ic"])],
        )
    except EncodingError as exc:
        raise KeyError_(str(exc)) from None
    return vk, doc


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)


def _rows(buf: bytes | np.ndarray, width: int) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.uint8).reshape(-1, width)


def save_keys(directory: Path, pk: ProvingKey, vk: VerifyingKey, circuit: str, meta: dict) -> None:
    """Write ``vk.json`` and ``pk.npz`` into ``directory`` (atomically, file by file)."""
    directory = Path(directory)
    raw: dict[str, bytes] = {}
    for name in ("a", "b_g1", "b_g2", "l", "h"):
        buf = (pk.raw or {}).get(name)  # queries without kept encodings (a loaded key keeps only the G1 ones)
        raw[name] = b"".join(p.to_xy_bytes_le() for p in getattr(pk, name)) if buf is None else buf
    fixed1 = b"".join(p.to_xy_bytes_le() for p in (pk.alpha_g1, pk.beta_g1, pk.delta_g1))
    fixed2 = b"".join(p.to_xy_bytes_le() for p in (pk.beta_g2, pk.delta_g2))
    full_meta = dict(meta, format=KEY_FORMAT, fingerprint=pk.fingerprint, domain_size=pk.domain_size,
                     num_inputs=pk.num_inputs, num_vars=pk.num_vars, circuit=circuit)
    directory.mkdir(parents=True, exist_ok=True)
    # Streamed into the temporary file (a 2^24 key is 9.7 GB: no second copy in memory).
    with atomic_output(directory / "pk.npz", "wb") as f:
        np.savez(
            f,
            a=_rows(raw["a"], 96), b_g1=_rows(raw["b_g1"], 96), b_g2=_rows(raw["b_g2"], 192),
            l=_rows(raw["l"], 96), h=_rows(raw["h"], 96),
            fixed_g1=_rows(fixed1, 96), fixed_g2=_rows(fixed2, 192),
            meta=np.frombuffer(json.dumps(full_meta).encode(), dtype=np.uint8),
        )
    seed = meta.get("seed")
    vk_doc = vk_to_json(vk, circuit, pk.fingerprint, test_seed=seed if isinstance(seed, int) else None)
    _atomic_write(directory / "vk.json", json.dumps(vk_doc, indent=1).encode())


def load_pk(path: Path, expect_fingerprint: str | None = None) -> ProvingKey:
    """Read ``pk.npz``; KeyMismatchError if ``expect_fingerprint`` differs, KeyError_ naming the file (and the
    member or field) if it is truncated, fails its CRC-32 check or is malformed."""
    path = Path(path)
    try:
        # The stored members are read straight into their arrays and CRC-checked in threads (np.load went
        # through zipfile in 256 KiB pieces: ~2 s for a 2^22 key); compressed members take zipfile's path.
        arrays = read_npz(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:  # BadZipFile: truncated copy, bad CRC
        raise KeyError_(f"{path}: cannot read proving key ({exc})") from None
    try:
        meta = json.loads(arrays["meta"].tobytes())
        fp = meta["fingerprint"]  # TypeError when meta is not a JSON object
        if not isinstance(fp, str):
            raise ValueError(f"fingerprint is {type(fp).__name__}, not a string")
    except (KeyError, TypeError, ValueError) as exc:
        raise KeyError_(f"{path}: missing or bad field 'meta' ({exc})") from None
    if expect_fingerprint is not None and fp != expect_fingerprint:
        raise KeyMismatchError(
            f"{path}: proving key is for circuit fingerprint {fp[:16]}, this circuit is {expect_fingerprint[:16]}"
        )
    try:
        f1 = fixed_base.decode_g1(arrays["fixed_g1"].tobytes())
        f2 = fixed_base.decode_g2(arrays["fixed_g2"].tobytes())
        return ProvingKey(
            alpha_g1=f1[0], beta_g1=f1[1], delta_g1=f1[2], beta_g2=f2[0], delta_g2=f2[1],
            # The queries decode on first use (a CUDA prover uploads the rows and never does; a corrupt row
            # then raises KeyError_ naming the file at that use).
            **{k: fixed_base.PointRows(np.ascontiguousarray(arrays[k]), "g2" if k == "b_g2" else "g1",
                                       f"{path}: {k}", KeyError_) for k in ("a", "b_g1", "b_g2", "l", "h")},
            domain_size=int(meta["domain_size"]), num_inputs=int(meta["num_inputs"]),
            num_vars=int(meta["num_vars"]), fingerprint=fp,
            # The rows as read (no copy unless stored column-major: raw is read as a buffer, in row order).
            raw={k: np.ascontiguousarray(arrays[k]) for k in ("a", "b_g1", "b_g2", "l", "h")},  # rows for load_bases
        )
    except KeyError as exc:
        raise KeyError_(f"{path}: missing field {exc}") from None
    except (ValueError, TypeError, IndexError) as exc:  # a decode error, a bad meta value, too few points
        raise KeyError_(f"{path}: corrupt point data ({exc})") from None


def cache_dir_for(key_dir: Path, circuit: str, label: str, fingerprint: str) -> Path:
    return Path(key_dir) / f"{circuit}-{label}-{fingerprint[:16]}"
