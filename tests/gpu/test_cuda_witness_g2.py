"""Device witness generation (kernels/witness.cu) against its Python reference, and the G2 MSM (the g2_* kernels
of msm.cu) against arkworks; a GPU proof with both on the device verifies. Marked ``gpu``.

Fresh random inputs every run (seeded from os.urandom, printed on failure).
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

from py_arkworks_bls12381 import G2Point, Scalar  # noqa: E402

import gputrace  # noqa: E402
from gputrace.prover.circuit import validate_shape  # noqa: E402
from gputrace.prover.encoding import g2_to_affine_limbs  # noqa: E402
from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars  # noqa: E402
from gputrace.prover.options import OPT_NAMES, ProveOptions  # noqa: E402
from gputrace.prover.witness_plan import make_plan, plan_witness  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture(scope="module")
def gpu():
    from gputrace.prover.backends.cuda import CudaBackend

    b = CudaBackend(1)
    yield b
    b.close()


@pytest.mark.parametrize("k,d,batch", [(1, 2, 1), (3, 4, 2), (8, 3, 1), (13, 6, 3)])
def test_device_witness_equals_reference(gpu, k, d, batch):
    """Every a/b/c row and every variable equals ``plan_witness`` (which equals the R1CS synthesis: unit tests)."""
    shape = validate_shape(k, d)
    n = 1 << (shape.constraints + k + 2 - 1).bit_length()
    seed = SEED % 1000
    plans = [make_plan(shape, seed, c) for c in range(batch)]
    lane = gpu.lanes(0)[0]
    abc, zs = gpu.device_witness(plans, n, 0, lane)
    host_abc = gpu.d2h(abc, lane)
    for j, plan in enumerate(plans):
        ref = plan_witness(plan, n)
        for row, name in enumerate("abc"):
            assert np.array_equal(host_abc[row * batch + j], ref.abc[row]), f"{name} of circuit {j} (seed {seed})"
        assert np.array_equal(gpu.d2h(zs[j], lane), ref.z_limbs), f"z of circuit {j} (seed {seed})"


def _g2_points(rng, n):
    base = [G2Point() * Scalar(rng.randrange(1, R)) for _ in range(min(n, 16))]
    pts, acc = [], base[0]
    for i in range(n):  # cheap distinct points: running sums of a few random multiples
        acc = acc + base[i % len(base)]
        pts.append(acc)
    return pts


@pytest.mark.parametrize("n", [1, 7, 100, 3000])
@pytest.mark.parametrize("kind", ["full", "sparse", "special"])
def test_g2_msm_matches_arkworks(gpu, n, kind):
    rng = random.Random(SEED + n)
    pts = _g2_points(rng, n)
    if kind == "full":
        sc = [rng.randrange(R) for _ in range(n)]
    elif kind == "sparse":
        sc = [rng.choice([0, 1, 1, 2, 3, R - 1, rng.randrange(1 << 20)]) for _ in range(n)]
    else:  # infinity and repeated bases
        sc = [rng.randrange(R) for _ in range(n)]
        for i in range(0, n, 5):
            pts[i] = G2Point.identity()
        for i in range(1, n, 7):
            pts[i] = pts[i - 1]
    limbs = ints_to_limbs(sc)
    want = G2Point.multiexp_unchecked(pts, limbs_to_scalars(limbs))
    bases = gpu.load_bases_g2("t", g2_to_affine_limbs(pts), 0)
    assert gpu.msm_g2(bases, limbs, lane=gpu.lanes(0)[0]) == want, f"g2 msm n={n} {kind} (seed {SEED})"
    dev = gpu.h2d(limbs, 0)  # device (Montgomery) scalars, as the pipeline passes z
    assert gpu.msm_g2(bases, dev) == want, f"g2 msm from device scalars n={n} {kind} (seed {SEED})"


def test_g2_msm_windows(gpu):
    from gputrace.prover.backends.cuda_msm import xyzz_to_g2

    rng = random.Random(SEED)
    pts = _g2_points(rng, 2000)
    limbs = ints_to_limbs([rng.randrange(R) for _ in range(2000)])
    want = G2Point.multiexp_unchecked(pts, limbs_to_scalars(limbs))
    d = gpu._dev(0)
    bases = d.msm2.load_bases(g2_to_affine_limbs(pts), None)
    for window in (4, 9, 13, 17):
        got = xyzz_to_g2(d.msm2.msm(bases, cupy.asarray(limbs), window, None).get())
        assert got == want, f"g2 msm window {window} (seed {SEED})"


@pytest.mark.parametrize("batch", [1, 2])
def test_gpu_proof_with_device_synthesis_and_g2_verifies(tmp_path, batch):
    from gputrace.prover.pipeline import run_prove

    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=3, depth=4, batch=batch, devices=1, backend="cuda",
                                     opts=frozenset(OPT_NAMES), synthesis="device", b_g2="device",
                                     out_dir=tmp_path, configure_tracer=False))
    finally:
        gputrace.shutdown()
    assert res.verified == [True] * batch
    assert (res.config["synthesis"], res.config["b_g2"]) == ("device", "device")
    timed = {s["name"] for s in sink.spans if "gputrace.gpu.start_ns" in s["attributes"]}
    assert {"synthesis", "intt_abc", "msm_h", "msm_a", "b_g2"} <= timed, timed
    assert "sync" not in {s["name"] for s in sink.spans if s["attributes"].get("gputrace.waits_for") == "b_g2"}
