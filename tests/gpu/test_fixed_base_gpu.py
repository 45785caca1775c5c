"""Key generation on the GPU (kernels/fixed_base.cu, backends/cuda_fixed_base.py) against the host path:
fixed-base multiples byte for byte (edge scalars included), the Lagrange weights, the fingerprint, whole keys
byte-identical for the same seed, and a proof with device-made keys that verifies. Marked ``gpu``.

Fresh random scalars every run (seeded from os.urandom, printed on failure).
"""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from gputrace.prover import fixed_base  # noqa: E402
from gputrace.prover.circuit import CircuitShape, shape_for_constraints  # noqa: E402
from gputrace.prover.field import R  # noqa: E402
from gputrace.prover.keygen.block import block_template  # noqa: E402
from gputrace.prover.keygen.cache import get_keys  # noqa: E402
from gputrace.prover.keygen.setup import lagrange_at  # noqa: E402
from gputrace.prover.keygen.template import template_cs  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
EDGES = [0, 1, 2, 3, 255, 256, 1 << 64, (1 << 64) - 1, 1 << 248, R - 1, R - 2, (R - 1) // 2, R, R + 1, (1 << 256) - 1]


@pytest.fixture(scope="module")
def fb():
    from gputrace.prover.backends.cuda_fixed_base import FixedBaseGpu

    return FixedBaseGpu(0)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_fixed_base_equals_cpu_bytes(fb, group):
    rng = random.Random(SEED)
    scalars = EDGES + [rng.randrange(R) for _ in range(300)] + [rng.randrange(1 << rng.randrange(1, 255)) for _ in range(100)]
    limbs = np.frombuffer(b"".join((k % (1 << 256)).to_bytes(32, "little") for k in scalars), dtype="<u8").reshape(-1, 4)
    got = fb.mul_rows(group, limbs)
    want = np.frombuffer(fixed_base.mul_gen(group, scalars), dtype=np.uint8).reshape(len(scalars), -1)
    bad = [i for i in range(len(scalars)) if not np.array_equal(got[i], want[i])]
    assert not bad, f"{group}: scalars {[hex(scalars[i]) for i in bad[:4]]} differ (seed {SEED})"
    assert not got[0].any() and not got[EDGES.index(R)].any()  # 0 and r: the identity as zeros
    # A list of ints (reduced mod r on the host) gives the same rows.
    assert np.array_equal(fb.mul_rows(group, scalars[:40]), want[:40])


def test_lagrange_weights_and_fingerprint_on_device():
    from gputrace.prover.backends.cuda_fixed_base import QapGpu, fingerprint

    for shape in (CircuitShape(3, 4), shape_for_constraints(1 << 12)):
        bt = block_template(shape)
        q = QapGpu(bt, 0)
        tau = random.Random(SEED).randrange(1, R)
        n = bt.domain_size()
        assert q.ints(q.lagrange(tau, n)) == lagrange_at(tau, n), f"{shape.label()} (seed {SEED})"
        assert fingerprint(q) == template_cs(shape).fingerprint(), shape.label()


@pytest.mark.parametrize("logn", [10, 11, 12])
def test_device_keys_are_byte_identical_to_host_keys(tmp_path, logn):
    shape = shape_for_constraints(1 << logn)
    seed = SEED % 10_000
    host = get_keys(shape, tmp_path / "host", seed=seed, keygen="host")
    dev = get_keys(shape, tmp_path / "dev", seed=seed, keygen="device")
    assert host.fingerprint == dev.fingerprint and host.directory.name == dev.directory.name
    with np.load(host.directory / "pk.npz") as a, np.load(dev.directory / "pk.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            assert np.array_equal(a[k], b[k]), f"2^{logn} pk.npz[{k}] differs (seed {seed})"
    assert json.loads(host.vk_path.read_text()) == json.loads(dev.vk_path.read_text())
    assert isinstance(dev.pk.a, fixed_base.PointRows) and not dev.pk.a.decoded


def test_proof_with_device_keys_verifies(tmp_path):
    from gputrace.prover.options import OPT_NAMES, ProveOptions
    from gputrace.prover.pipeline import run_prove

    o = ProveOptions(constraints=1 << 12, backend="cuda", opts=frozenset(OPT_NAMES), out_dir=tmp_path / "out",
                     key_dir=tmp_path / "keys", key_seed=SEED % 1000, keygen="device")
    r = run_prove(o)
    assert r.verified == [True] and not r.key_cached
