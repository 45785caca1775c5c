"""Groth16 verification by pairings, and proof files.

``proof-<circuit>.json``: ``{"a": G1 hex, "b": G2 hex, "c": G1 hex, "public_inputs": [decimal str]}``
(compressed points, the zcash/blst encoding). Checks e(A,B) = e(α,β)·e(Σ x_i·IC_i, γ)·e(C,δ) as one
``pairing_check`` of four pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from py_arkworks_bls12381 import GT, G1Point, G2Point

from .encoding import EncodingError, g1_from_hex, g1_to_hex, g2_from_hex, g2_to_hex
from .field import R, to_scalars
from .keygen.setup import VerifyingKey


class ProofFileError(ValueError):
    """A proof file is unreadable or malformed; the message names the file and field."""


class InputCountError(ValueError):
    """The number of public inputs does not match the verifying key."""


@dataclass
class Proof:
    a: G1Point
    b: G2Point
    c: G1Point


def proof_to_json(proof: Proof, public_inputs: list[int], circuit: int | str | None = None) -> dict:
    doc: dict[str, object] = {
        "a": g1_to_hex(proof.a),
        "b": g2_to_hex(proof.b),
        "c": g1_to_hex(proof.c),
        "public_inputs": [str(x) for x in public_inputs],
    }
    if circuit is not None:
        doc["circuit"] = circuit
    return doc


def write_proof(path: Path, proof: Proof, public_inputs: list[int], circuit: int | str | None = None) -> None:
    from gputrace.atomic_write import write_atomic

    write_atomic(path, json.dumps(proof_to_json(proof, public_inputs, circuit), indent=1))


def read_proof(path: Path) -> tuple[Proof, list[int]]:
    """Parse a proof file; ProofFileError names the file and the offending field."""
    path = Path(path)
    from gputrace.json_depth import too_deep

    try:
        raw = Path(path).read_bytes()
        if too_deep(raw):  # (a raised recursion limit would let json overflow the C stack)
            raise RecursionError
        doc = json.loads(raw)
    except OSError as exc:
        raise ProofFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ProofFileError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ProofFileError(f"{path}: not a proof (JSON nested too deeply)") from None
    if not isinstance(doc, dict):
        raise ProofFileError(f"{path}: expected a JSON object")
    for f in ("a", "b", "c", "public_inputs"):
        if f not in doc:
            raise ProofFileError(f"{path}: missing field {f!r}")
    try:
        proof = Proof(
            a=g1_from_hex(doc["a"], f"{path}: field 'a'"),
            b=g2_from_hex(doc["b"], f"{path}: field 'b'"),
            c=g1_from_hex(doc["c"], f"{path}: field 'c'"),
        )
    except EncodingError as exc:
        raise ProofFileError(str(exc)) from None
    pis = doc["public_inputs"]
    if not isinstance(pis, list):
        raise ProofFileError(f"{path}: field 'public_inputs' must be a list of decimal strings")
    values = []
    for i, s in enumerate(pis):
        if not isinstance(s, str) or not (s.isascii() and s.isdigit()):  # isdigit alone accepts '²', '٣'
            raise ProofFileError(f"{path}: field 'public_inputs[{i}]' must be a decimal string, got {s!r}")
        v = int(s)
        if v >= R:
            raise ProofFileError(f"{path}: field 'public_inputs[{i}]' is not below the scalar field modulus")
        values.append(v)
    return proof, values


class DegenerateKeyError(ValueError):
    """A verifying key (or proof) with a point at infinity where Groth16 needs a real point."""


def check_vk(vk: VerifyingKey) -> None:
    """Refuse a degenerate verifying key: alpha, beta, gamma or delta at infinity makes its pairing
    factor 1, and with every point at infinity the all-infinity proof verifies for any input; gamma = ±delta
    lets anyone holding the key make a proof for any input. Raises DegenerateKeyError naming the element."""
    for name, p, zero in (("alpha_g1", vk.alpha_g1, G1Point.identity()), ("beta_g2", vk.beta_g2, G2Point.identity()),
                          ("gamma_g2", vk.gamma_g2, G2Point.identity()), ("delta_g2", vk.delta_g2, G2Point.identity())):
        if p == zero:
            raise DegenerateKeyError(f"degenerate verifying key: {name} is the point at infinity")
    # gamma = ±delta folds e(acc, gamma) into e(C, delta): C = ∓acc (with A = alpha, B = beta) then verifies for
    # any public inputs, made from the key alone.
    if vk.gamma_g2 == vk.delta_g2:
        raise DegenerateKeyError(
            "degenerate verifying key: gamma_g2 equals delta_g2 (public inputs could be moved into C)")
    if vk.gamma_g2 == -vk.delta_g2:
        raise DegenerateKeyError(
            "degenerate verifying key: gamma_g2 equals -delta_g2 (a proof could be made from the key alone)")


def verify(vk: VerifyingKey, proof: Proof, public_inputs: list[int]) -> bool:
    """True iff the proof verifies. InputCountError if the input count does not match the key;
    DegenerateKeyError for a degenerate key (``check_vk``); a proof with A, B or C at infinity is
    refused (False: an honest proof has each at infinity with negligible probability); ValueError
    for an input outside ``[0, R)`` (reducing it would accept one proof for every ``x + k·R``, the
    input-aliasing flaw)."""
    check_vk(vk)
    if len(public_inputs) + 1 != len(vk.ic):
        raise InputCountError(
            f"verifying key expects {len(vk.ic) - 1} public inputs, proof has {len(public_inputs)}"
        )
    for i, x in enumerate(public_inputs):
        if not 0 <= x < R:
            raise ValueError(f"public input {i} is not in the scalar field (0 <= x < r)")
    if proof.a == G1Point.identity() or proof.b == G2Point.identity() or proof.c == G1Point.identity():
        return False
    acc = vk.ic[0]
    if public_inputs:
        acc = acc + G1Point.multiexp_unchecked(vk.ic[1:], to_scalars(public_inputs))
    return bool(
        GT.pairing_check([-proof.a, vk.alpha_g1, acc, proof.c], [proof.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2])
    )
