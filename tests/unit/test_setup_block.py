"""Key generation from the circuit's block (keygen/block.py), the keygen dispatch and lazily decoded key queries.

The block decomposition is what lets the device path skip the whole template R1CS, so it is checked against
the R1CS itself: column sums, row values and the fingerprint equal ``ConstraintSystem``'s for several shapes.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gputrace.prover import fixed_base
from gputrace.prover.circuit import CircuitShape, shape_for_constraints
from gputrace.prover.field import R, limbs_to_ints
from gputrace.prover.keygen.block import (FINGERPRINT_SEED, block_template, column_values, fingerprint_host,
                                         fingerprint_vector, row_values)
from gputrace.prover.keygen import keys
from gputrace.prover.keygen.cache import get_keys, resolve_keygen
from gputrace.prover.keygen.setup import domain_size_for, lagrange_at
from gputrace.prover.keygen.template import template_cs

SHAPES = [CircuitShape(1, 2), CircuitShape(3, 4), shape_for_constraints(1 << 11)]


def test_fingerprint_vector_is_pythons_random_draws():
    rng = random.Random(FINGERPRINT_SEED)
    ref = [rng.randrange(R) for _ in range(3000)]
    assert limbs_to_ints(fingerprint_vector(3000)) == ref
    assert limbs_to_ints(fingerprint_vector(1)) == ref[:1]
    assert fingerprint_vector(0).shape == (0, 4)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.label())
def test_block_copies_equal_the_whole_template_r1cs(shape):
    bt = block_template(shape)
    cs = template_cs(shape)
    assert (bt.num_inputs, bt.num_vars, bt.num_constraints) == (cs.num_inputs, cs.num_vars, cs.num_constraints)
    assert bt.domain_size() == domain_size_for(cs)
    weights = lagrange_at(random.Random(7).randrange(1, R), bt.domain_size())
    z = [random.Random(i).randrange(R) for i in range(cs.num_vars)]
    whole = cs.evaluate(z, check=False)
    for m in range(3):
        assert column_values(bt, m, weights) == cs.column_sums(m, weights), "ABC"[m]
        assert row_values(bt, m, z) == whole[m], "ABC"[m]
    assert fingerprint_host(bt) == cs.fingerprint()


def test_block_global_variables():
    bt = block_template(CircuitShape(3, 2))
    v = np.array([0, 1, 2, 3, 4])
    assert bt.global_var(v, 0).tolist() == [0, 1, 2, 5, 6]  # private vars start after ONE, root, 3 indices
    assert bt.global_var(v, 2).tolist() == [0, 1, 4, 5 + 2 * bt.vpc, 6 + 2 * bt.vpc]
    assert [bt.global_var(int(x), 1) for x in v] == bt.global_var(v, 1).tolist()


def test_resolve_keygen_choices():
    assert resolve_keygen("host") == "host"
    with pytest.raises(ValueError, match="--keygen"):
        resolve_keygen("gpu")
    try:
        from gputrace.prover.backends import cuda_fixed_base

        has_device = cuda_fixed_base.device_available()
    except ImportError:
        has_device = False
    assert resolve_keygen("auto") == ("device" if has_device else "host")
    if not has_device:
        from gputrace.prover.backends.base import BackendUnavailable

        with pytest.raises(BackendUnavailable, match="--keygen device"):
            resolve_keygen("device")


def test_point_rows_decode_on_first_use_only():
    pts = [G1Point() * Scalar(k) for k in (1, 2, 3)]
    rows = np.frombuffer(b"".join(p.to_xy_bytes_le() for p in pts), dtype=np.uint8).reshape(3, 96)
    pr = fixed_base.PointRows(rows, "g1")
    assert len(pr) == 3 and not pr.decoded
    assert pr[1] == pts[1] and pr.decoded
    assert pr[:2] == pts[:2] and list(pr) == pts and pr == pts
    g2 = [G2Point() * Scalar(5)]
    assert fixed_base.PointRows(b"".join(p.to_xy_bytes_le() for p in g2), "g2") == g2
    bad = rows.copy()
    bad[0, 0] ^= 1  # x no longer on the curve
    broken = fixed_base.PointRows(bad, "g1", "pk.npz: a", keys.KeyError_)
    assert len(broken) == 3
    with pytest.raises(keys.KeyError_, match="pk.npz: a: corrupt point data"):
        broken[0]
    with pytest.raises(ValueError, match="group"):
        fixed_base.PointRows(rows, "g3")


def test_point_rows_decode_once_when_read_concurrently(monkeypatch):
    """Threads that read a query while its first decode runs wait for it: one decode, one list for all (the host
    b_g2's part threads used to decode a 2^20 G2 query once each, docs/prover.md "The host path at 2^20")."""
    pts = [G1Point() * Scalar(k) for k in (1, 2, 3)]
    pr = fixed_base.PointRows(b"".join(p.to_xy_bytes_le() for p in pts), "g1")
    real, calls = fixed_base.decode_g1, []

    def slow_decode(buf):  # a long first decode: every reader arrives while it runs
        calls.append(threading.current_thread().name)
        time.sleep(0.3)
        return real(buf)

    monkeypatch.setattr(fixed_base, "decode_g1", slow_decode)
    start, got = threading.Barrier(4, timeout=10), []

    def read():
        start.wait()
        got.append(pr.points())

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(calls) == 1 and len(got) == 4
    assert all(g is got[0] for g in got) and got[0] == pts


def test_loaded_key_keeps_rows_and_decodes_lazily(tmp_path):
    shape = shape_for_constraints(1 << 9)
    made = get_keys(shape, tmp_path, seed=3, keygen="host")
    loaded = get_keys(shape, tmp_path, seed=3, keygen="host")
    assert loaded.cached and not made.cached
    pk = loaded.pk
    for name in ("a", "b_g1", "b_g2", "l", "h"):
        q = getattr(pk, name)
        assert isinstance(q, fixed_base.PointRows) and not q.decoded, name
        assert pk.affine_limbs(name) is not None and not q.decoded, name
        assert q == getattr(made.pk, name), name  # decodes: the same points as generated


def test_keygen_flag_reaches_the_options():
    from gputrace.cli import build_parser
    from gputrace.commands.prove import options_from_args

    parse = build_parser().parse_args
    assert options_from_args(parse(["prove"])).keygen == "auto"
    assert options_from_args(parse(["prove", "--keygen", "host"])).keygen == "host"
    assert options_from_args(parse(["prove", "--keygen", "device"])).keygen == "device"
    with pytest.raises(SystemExit):
        parse(["prove", "--keygen", "gpu"])
