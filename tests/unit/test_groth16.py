"""Groth16 end to end on small circuits: setup, proofs, verification, tampering, key and file errors."""

import json
import shutil

import pytest
from py_arkworks_bls12381 import G1Point

from gputrace.prover.circuit import CircuitShape
from gputrace.prover.field import R
from gputrace.prover.keygen import keys
from gputrace.prover.keygen.cache import get_keys
from gputrace.prover.options import ProveOptions
from gputrace.prover.pipeline import run_prove
from gputrace.prover.verify import ProofFileError, read_proof, verify, write_proof
from gputrace.prover.verify_files import verify_files


@pytest.fixture(scope="session")
def key_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "prover-keys"


@pytest.fixture(scope="session")
def proved(key_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("proofs")
    res = run_prove(ProveOptions(challenges=1, depth=2, batch=2, devices=1, out_dir=out, key_dir=key_dir,
                                 configure_tracer=False))
    return res


def test_proofs_verify(proved):
    assert proved.verified == [True, True]
    vk, doc = keys.load_vk(proved.vk_path)
    assert set(doc) >= {"alpha_g1", "beta_g2", "gamma_g2", "delta_g2", "ic"}
    assert len(doc["ic"]) == 1 + 2  # ONE, root, one index
    for p in proved.proof_paths:
        d = json.loads(p.read_text())
        assert len(bytes.fromhex(d["a"])) == 48 and len(bytes.fromhex(d["b"])) == 96
        assert all(isinstance(x, str) and x.isdigit() for x in d["public_inputs"])
        proof, inputs = read_proof(p)
        assert verify(vk, proof, inputs)


def test_tampered_proof_and_wrong_input_fail(proved):
    vk, _ = keys.load_vk(proved.vk_path)
    proof, inputs = read_proof(proved.proof_paths[0])
    assert not verify(vk, proof, [inputs[0] + 1] + inputs[1:])
    assert not verify(vk, proof, inputs[:1] + [inputs[1] ^ 1])
    proof.a = proof.a + G1Point()
    assert not verify(vk, proof, inputs)
    other, _ = read_proof(proved.proof_paths[1])
    assert not verify(vk, other, inputs)  # proof of circuit 1 with circuit 0's inputs


def test_public_inputs_outside_the_field_are_refused(proved):
    # x + r and x - r alias x in the field: reducing them would accept this proof for those inputs too.
    vk, _ = keys.load_vk(proved.vk_path)
    proof, inputs = read_proof(proved.proof_paths[0])
    for x in (inputs[0] + R, inputs[0] - R):
        with pytest.raises(ValueError, match="public input 0 is not in the scalar field"):
            verify(vk, proof, [x] + inputs[1:])


def test_corrupt_proof_files_name_file_and_field(proved, tmp_path):
    src = json.loads(proved.proof_paths[0].read_text())
    cases = [
        ("a", dict(src, a="00" * 48)),
        ("b", dict(src, b=src["b"][:-2])),
        ("public_inputs[1]", dict(src, public_inputs=[src["public_inputs"][0], "12x"])),
        ("public_inputs[0]", dict(src, public_inputs=["\u00b2"])),  # str.isdigit() is true, int() fails
        ("public_inputs[0]", dict(src, public_inputs=["\u0663"])),  # Arabic-Indic 3: not a decimal string
        ("'c'", {k: v for k, v in src.items() if k != "c"}),
    ]
    for k, (field_name, doc) in enumerate(cases):
        p = tmp_path / f"bad-{k}.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(ProofFileError) as ei:
            read_proof(p)
        assert str(p) in str(ei.value) and field_name in str(ei.value)
    p = tmp_path / "notjson.json"
    p.write_text("{")
    with pytest.raises(ProofFileError, match="not valid JSON"):
        read_proof(p)
    verdicts = verify_files(proved.vk_path, [proved.proof_paths[0], p])
    assert verdicts[0].ok and not verdicts[1].ok and str(p) in verdicts[1].error


def test_bad_proving_key_meta_names_file_and_field(proved, key_dir, tmp_path):
    import numpy as np

    ks = get_keys(CircuitShape(1, 2), key_dir)
    with np.load(ks.directory / "pk.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for meta in ([1, 2], {"fingerprint": 7}):
        p = tmp_path / "pk.npz"
        np.savez(p, **dict(arrays, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)))
        with pytest.raises(keys.KeyError_, match="field 'meta'") as ei:
            keys.load_pk(p, expect_fingerprint=ks.fingerprint)
        assert str(p) in str(ei.value)
    raw = (ks.directory / "pk.npz").read_bytes()
    for cut in (len(raw) // 2, 100, len(raw) - 1):  # interrupted copies of a cached key
        p.write_bytes(raw[:cut])
        with pytest.raises(keys.KeyError_, match="cannot read proving key") as ei:
            keys.load_pk(p)
        assert str(p) in str(ei.value)


def test_proving_key_round_trips_through_pk_npz(tmp_path):
    """load_pk gives what np.load reads (rows in stored order, C-contiguous) and the key that was generated."""
    import numpy as np

    ks = get_keys(CircuitShape(1, 2), tmp_path, seed=1)
    assert not ks.cached  # ks.pk is setup's key, not one read back
    pk = keys.load_pk(ks.directory / "pk.npz", expect_fingerprint=ks.fingerprint)
    with np.load(ks.directory / "pk.npz") as z:
        for name in ("a", "b_g1", "b_g2", "l", "h"):
            assert pk.raw[name].dtype == np.uint8 and pk.raw[name].flags.c_contiguous, name
            assert np.array_equal(pk.raw[name], z[name]), name
            assert np.array_equal(getattr(pk, name).rows, z[name]), name
    saved = ks.pk
    for f in ("alpha_g1", "beta_g1", "delta_g1", "beta_g2", "delta_g2"):
        assert getattr(pk, f) == getattr(saved, f), f
    for name in ("a", "b_g1", "b_g2", "l", "h"):
        assert list(getattr(pk, name)) == list(getattr(saved, name)), name
    assert (pk.domain_size, pk.num_inputs, pk.num_vars, pk.fingerprint) == (
        saved.domain_size, saved.num_inputs, saved.num_vars, saved.fingerprint)


def test_a_flipped_byte_in_pk_npz_names_the_file_and_member(proved, key_dir, tmp_path):
    import struct
    import zipfile

    ks = get_keys(CircuitShape(1, 2), key_dir)
    src = ks.directory / "pk.npz"
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("b_g2.npy")
    raw = bytearray(src.read_bytes())
    name_len, extra_len = struct.unpack("<2H", raw[info.header_offset + 26:info.header_offset + 30])
    raw[info.header_offset + 30 + name_len + extra_len + info.file_size - 1] ^= 0x80  # the last G2 row's last byte
    p = tmp_path / "pk.npz"
    p.write_bytes(bytes(raw))
    with pytest.raises(keys.KeyError_, match="cannot read proving key .*'b_g2.npy'") as ei:
        keys.load_pk(p, expect_fingerprint=ks.fingerprint)
    assert str(p) in str(ei.value)


def test_a_compressed_pk_npz_still_loads(proved, key_dir, tmp_path):
    import numpy as np

    ks = get_keys(CircuitShape(1, 2), key_dir)
    with np.load(ks.directory / "pk.npz") as z:
        arrays = {k: z[k] for k in z.files}
    p = tmp_path / "pk.npz"
    np.savez_compressed(p, **arrays)
    pk = keys.load_pk(p, expect_fingerprint=ks.fingerprint)
    for name in ("a", "b_g1", "b_g2", "l", "h"):
        assert np.array_equal(pk.raw[name], arrays[name]), name
    assert pk.delta_g2 == ks.pk.delta_g2


def test_key_rows_stored_column_major_give_the_same_affine_limbs(proved, key_dir, tmp_path):
    """A pk.npz whose rows are Fortran-ordered (another writer) decodes by tobytes(); the GPU limbs must be
    the same points, not a transposed buffer or a 'not C-contiguous' error."""
    import numpy as np

    from gputrace.prover.encoding import g1_to_affine_limbs

    ks = get_keys(CircuitShape(1, 2), key_dir)
    with np.load(ks.directory / "pk.npz") as z:
        arrays = {k: z[k] for k in z.files}
    p = tmp_path / "pk.npz"
    np.savez(p, **{k: np.asfortranarray(v) for k, v in arrays.items()})
    pk = keys.load_pk(p, expect_fingerprint=ks.fingerprint)
    for name in ("a", "b_g1", "l", "h"):
        assert np.array_equal(pk.affine_limbs(name), g1_to_affine_limbs(getattr(pk, name))), name


def test_wrong_input_count_and_foreign_vk(proved, key_dir, tmp_path):
    vk, _ = keys.load_vk(proved.vk_path)
    proof, inputs = read_proof(proved.proof_paths[0])
    with pytest.raises(ValueError, match="expects 2 public inputs"):
        verify(vk, proof, inputs + [1])
    other = get_keys(CircuitShape(1, 3), key_dir, seed=1)
    verdicts = verify_files(other.vk_path, proved.proof_paths)
    assert not any(v.ok for v in verdicts)


def test_key_cache_reuse_and_mismatch(proved, key_dir, tmp_path):
    ks = get_keys(CircuitShape(1, 2), key_dir)
    assert ks.cached  # generated (from fresh randomness) by the session fixture
    with pytest.raises(keys.KeyMismatchError, match="fingerprint"):
        keys.load_pk(ks.directory / "pk.npz", expect_fingerprint="0" * 40)
    # A key directory whose files belong to another circuit is refused, not used.
    other = get_keys(CircuitShape(1, 3), key_dir)
    fake = tmp_path / "cache"
    target = keys.cache_dir_for(fake, "merkle-poseidon-t3", "K1-D2", ks.fingerprint)
    shutil.copytree(other.directory, target)
    with pytest.raises(keys.KeyMismatchError):
        get_keys(CircuitShape(1, 2), fake)


def test_bad_vk_file_names_field(tmp_path, proved):
    doc = json.loads(proved.vk_path.read_text())
    doc["gamma_g2"] = "ab"
    p = tmp_path / "vk.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(keys.KeyError_, match="gamma_g2"):
        keys.load_vk(p)


def test_written_proof_roundtrips(proved, tmp_path):
    proof, inputs = read_proof(proved.proof_paths[1])
    p = tmp_path / "proof-x.json"
    write_proof(p, proof, inputs, circuit="x")
    again, inputs2 = read_proof(p)
    assert inputs2 == inputs and again.a == proof.a and again.b == proof.b and again.c == proof.c


@pytest.mark.parametrize("size,batch,devices,opts", [
    (dict(constraints=1 << 10), 3, 1, frozenset({"a1", "d4"})),
    (dict(challenges=3, depth=3), 1, 3, frozenset({"a2", "b1", "a4"})),
])
@pytest.mark.slow
def test_other_sizes_and_batches_verify(tmp_path, key_dir, size, batch, devices, opts):
    res = run_prove(ProveOptions(batch=batch, devices=devices, opts=opts, out_dir=tmp_path, key_dir=key_dir,
                                 configure_tracer=False, **size))
    assert res.verified == [True] * (batch * devices)
    assert len({p.read_text() for p in res.proof_paths}) == batch * devices
