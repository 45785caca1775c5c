"""An independent verifier: py_ecc (pure-Python BLS12-381, its own point decompression and pairing)
accepts our proof files and vk.json, and rejects a wrong public input (a few seconds: pure-Python pairings)."""

import pytest

py_ecc = pytest.importorskip("py_ecc")

from py_ecc.bls.point_compression import decompress_G1, decompress_G2  # noqa: E402
from py_ecc.optimized_bls12_381 import FQ12, add, final_exponentiate, multiply, neg, pairing  # noqa: E402

from gputrace.prover.options import ProveOptions  # noqa: E402
from gputrace.prover.pipeline import run_prove  # noqa: E402


def _g1(hexstr):
    return decompress_G1(int(hexstr, 16))


def _g2(hexstr):
    raw = bytes.fromhex(hexstr)
    return decompress_G2((int.from_bytes(raw[:48], "big"), int.from_bytes(raw[48:], "big")))


def _check(vk, proof, inputs) -> bool:
    ic = [_g1(x) for x in vk["ic"]]
    acc = ic[0]
    for x, p in zip(inputs, ic[1:]):
        acc = add(acc, multiply(p, x))
    f = (pairing(_g2(proof["b"]), neg(_g1(proof["a"])), final_exponentiate=False)
         * pairing(_g2(vk["beta_g2"]), _g1(vk["alpha_g1"]), final_exponentiate=False)
         * pairing(_g2(vk["gamma_g2"]), acc, final_exponentiate=False)
         * pairing(_g2(vk["delta_g2"]), _g1(proof["c"]), final_exponentiate=False))
    return final_exponentiate(f) == FQ12.one()


def test_py_ecc_accepts_our_proof(tmp_path_factory):
    import json

    out = tmp_path_factory.mktemp("indep")
    res = run_prove(ProveOptions(challenges=1, depth=2, batch=1, devices=1, out_dir=out,
                                 key_dir=tmp_path_factory.getbasetemp() / "prover-keys", configure_tracer=False))
    vk = json.loads(res.vk_path.read_text())
    proof = json.loads(res.proof_paths[0].read_text())
    inputs = [int(x) for x in proof["public_inputs"]]
    assert _check(vk, proof, inputs)
    assert not _check(vk, proof, [inputs[0] + 1] + inputs[1:])
