"""The verifier against hostile keys and encodings: degenerate keys (points at infinity, gamma = ±delta)
are refused, only canonical compressed encodings decode, nested JSON is a clean error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gputrace.prover.encoding import Q, EncodingError, g1_from_hex, g1_to_hex, g2_from_hex, g2_to_hex
from gputrace.prover.keygen.keys import KeyError_, vk_to_json
from gputrace.prover.keygen.setup import VerifyingKey
from gputrace.prover.verify import DegenerateKeyError, Proof, ProofFileError, read_proof, verify, write_proof
from gputrace.prover.verify_files import verify_files

ROOT = Path(__file__).resolve().parents[2]
G1_INF = "c0" + "00" * 47
G2_INF = "c0" + "00" * 95


def _vk(**override) -> VerifyingKey:
    g1, g2 = G1Point(), G2Point()
    base = dict(alpha_g1=g1 * Scalar(3), beta_g2=g2 * Scalar(5), gamma_g2=g2 * Scalar(7), delta_g2=g2 * Scalar(11),
                ic=[g1 * Scalar(13), g1 * Scalar(17)])
    return VerifyingKey(**{**base, **override})


def _identity_proof() -> Proof:
    return Proof(G1Point.identity(), G2Point.identity(), G1Point.identity())


def test_all_identity_key_and_proof_is_refused(tmp_path):
    vk = _vk(alpha_g1=G1Point.identity(), beta_g2=G2Point.identity(), gamma_g2=G2Point.identity(),
             delta_g2=G2Point.identity(), ic=[G1Point.identity(), G1Point.identity()])
    with pytest.raises(DegenerateKeyError, match="alpha_g1"):
        verify(vk, _identity_proof(), [42])
    vk_path = tmp_path / "vk.json"
    vk_path.write_text(json.dumps(vk_to_json(vk, "c", "f" * 16)))
    proof_path = tmp_path / "proof-0.json"
    write_proof(proof_path, _identity_proof(), [42])
    with pytest.raises(KeyError_, match="degenerate verifying key"):
        verify_files(vk_path, [proof_path])
    r = subprocess.run([sys.executable, "-m", "gputrace", "verify", "--vk", str(vk_path), str(proof_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "degenerate verifying key" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("field", ["alpha_g1", "beta_g2", "gamma_g2", "delta_g2"])
def test_each_element_at_infinity_is_refused(field):
    zero = G1Point.identity() if field.endswith("g1") else G2Point.identity()
    with pytest.raises(DegenerateKeyError, match=field):
        verify(_vk(**{field: zero}), Proof(G1Point(), G2Point(), G1Point()), [1])


def test_gamma_equal_to_delta_is_refused():
    g = G2Point() * Scalar(7)
    with pytest.raises(DegenerateKeyError, match="gamma_g2 equals delta_g2"):
        verify(_vk(gamma_g2=g, delta_g2=g), Proof(G1Point(), G2Point(), G1Point()), [1])


def test_gamma_equal_to_minus_delta_is_refused_the_forged_proof_would_verify():
    """gamma = -delta makes e(acc, gamma) e(C, delta) = e(C - acc, delta): with A = alpha, B = beta and C = acc
    (the public inputs' combination of IC) the equation holds for any inputs, from the key alone."""
    from py_arkworks_bls12381 import GT

    delta = G2Point() * Scalar(11)
    vk = _vk(gamma_g2=-delta, delta_g2=delta)
    inputs = [1234567]
    acc = vk.ic[0] + vk.ic[1] * Scalar(inputs[0])
    forged = Proof(a=vk.alpha_g1, b=vk.beta_g2, c=acc)
    # The forgery is real: the pairing equation verify checks holds for it.
    assert GT.pairing_check([-forged.a, vk.alpha_g1, acc, forged.c], [forged.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2])
    with pytest.raises(DegenerateKeyError, match="gamma_g2 equals -delta_g2"):
        verify(vk, forged, inputs)


def test_proof_points_at_infinity_do_not_verify():
    assert verify(_vk(), _identity_proof(), [1]) is False


@pytest.mark.parametrize("hexstr, what", [
    ("e0" + "00" * 47, "infinity"),             # infinity with the sort flag
    ("c0" + "00" * 46 + "01", "infinity"),      # infinity with stray bits
    ("c1" + "00" * 47, "infinity"),             # infinity with bits in the first byte
    ("00" * 48, "compression flag"),            # uncompressed flag
    ((Q | (1 << 383)).to_bytes(48, "big").hex(), "field modulus"),  # x = q
])
def test_non_canonical_g1_encodings_are_refused(hexstr, what):
    with pytest.raises(EncodingError, match=what):
        g1_from_hex(hexstr, "proof: field 'a'")


def test_non_canonical_g2_encodings_are_refused_and_canonical_ones_roundtrip():
    with pytest.raises(EncodingError, match="infinity"):
        g2_from_hex("e0" + "00" * 95)
    with pytest.raises(EncodingError, match="infinity"):
        g2_from_hex("c0" + "00" * 94 + "01")
    g = G2Point() * Scalar(9)
    assert g2_from_hex(g2_to_hex(g)) == g and g2_from_hex(G2_INF) == G2Point.identity()
    p = G1Point() * Scalar(9)
    assert g1_from_hex(g1_to_hex(p)) == p and g1_from_hex(G1_INF) == G1Point.identity()
    bad_c0 = bytearray(bytes.fromhex(g2_to_hex(g)))
    bad_c0[48:96] = Q.to_bytes(48, "big")  # second coordinate = q
    with pytest.raises(EncodingError, match="coordinate 1"):
        g2_from_hex(bytes(bad_c0).hex())


def test_nested_json_is_a_clean_error(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    proof_path = tmp_path / "proof.json"
    proof_path.write_text(deep)
    with pytest.raises(ProofFileError, match="not"):
        read_proof(proof_path)
    vk_path = tmp_path / "vk.json"
    vk_path.write_text(deep)
    with pytest.raises(KeyError_):
        verify_files(vk_path, [proof_path])
    r = subprocess.run([sys.executable, "-m", "gputrace", "verify", "--vk", str(vk_path), str(proof_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_nested_json_is_refused_even_with_a_raised_recursion_limit(tmp_path, monkeypatch):
    # py_ecc (imported by other code in the same process) raises the limit to 100,000; json would then
    # recurse in C past the stack instead of raising RecursionError.
    import gputrace.json_depth as depth

    monkeypatch.setattr(depth.sys, "getrecursionlimit", lambda: 100_000)
    p = tmp_path / "proof.json"
    p.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ProofFileError, match="nested too deeply"):
        read_proof(p)
    with pytest.raises(KeyError_, match="nested too deeply"):
        verify_files(p, [p])
