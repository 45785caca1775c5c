"""CPU backend against direct computation: NTT conventions, H evaluation, MSM with/without D4 plans."""

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point

from gputrace.prover.backends import make_backend
from gputrace.prover.backends.base import BackendError
from gputrace.prover.msm_plan import MsmPlan
from gputrace.prover.backends.cpu import CpuBackend
from gputrace.prover.field import COSET_SHIFT, R, ints_to_limbs, limbs_to_ints, root_of_unity, to_scalar
from gputrace.prover.msm_plan import plan_msm


def test_ntt_conventions_against_direct_evaluation():
    be = CpuBackend(1)
    rng = random.Random(1)
    n = 16
    rows = [[rng.randrange(R) for _ in range(n)] for _ in range(2)]
    dev = be.h2d(ints_to_limbs(sum(rows, [])).reshape(2, n, 4), 0)
    w = root_of_unity(n)
    ev = be.d2h(be.ntt(dev, inverse=False, coset=True))
    got = limbs_to_ints(ev[1])
    for k in (0, 5, 15):
        x = COSET_SHIFT * pow(w, k, R) % R
        assert got[k] == sum(c * pow(x, i, R) for i, c in enumerate(rows[1])) % R
    back = be.ntt(be.ntt(dev, inverse=False, coset=True), inverse=True, coset=True)
    assert limbs_to_ints(be.d2h(back).reshape(-1, 4)) == sum(rows, [])
    plain = be.ntt(be.ntt(dev, inverse=True, coset=False), inverse=False, coset=False)
    assert limbs_to_ints(be.d2h(plain).reshape(-1, 4)) == sum(rows, [])


def test_h_eval_divides_by_vanishing_on_coset():
    be = CpuBackend(1)
    n = 8
    a, b, c = ([random.randrange(R) for _ in range(n)] for _ in range(3))
    mk = lambda v: be.h2d(ints_to_limbs(v).reshape(1, n, 4), 0)
    h = limbs_to_ints(be.d2h(be.h_eval(mk(a), mk(b), mk(c))).reshape(-1, 4))
    z = (pow(COSET_SHIFT, n, R) - 1) % R
    assert all(h[i] * z % R == (a[i] * b[i] - c[i]) % R for i in range(n))


def test_msm_plans_and_batch_add_agree_with_naive():
    be = CpuBackend(2)
    rng = random.Random(2)
    g = G1Point()
    pts = [g * to_scalar(rng.randrange(1, R)) for _ in range(40)]
    scalars = [0, 1, 1, 5, (1 << 63) + 3] + [rng.randrange(R) for _ in range(30)] + [2, 0, 1, 7, 9]
    bases = be.load_bases("a", pts, 1)
    naive = G1Point.identity()
    for p, s in zip(pts, scalars):
        naive = naive + p * to_scalar(s)
    limbs = ints_to_limbs(scalars)
    assert be.msm_g1(bases, limbs) == naive
    plan = plan_msm(limbs)
    assert plan.narrow_bits == 65 and 4 <= plan.window <= 16
    assert be.msm_g1(bases, limbs, plan=plan) == naive
    assert be.msm_g1(bases, limbs, plan=MsmPlan(window=8, narrow_bits=0)) == naive
    dev = be.h2d(limbs, 1)
    assert be.msm_g1(bases, dev) == naive
    sel = np.array([s == 1 for s in scalars])
    expect = G1Point.identity()
    for p, s in zip(pts, scalars):
        if s == 1:
            expect = expect + p
    assert be.batch_add_g1(bases, sel) == expect
    with pytest.raises(BackendError, match="41 scalars for 40 bases"):
        be.msm_g1(bases, ints_to_limbs(scalars + [1]))


def test_pin_unpin_and_lanes():
    be = CpuBackend(3)
    assert be.device_count() == 3
    lane = be.lanes(2)[0]
    assert lane.device == -1 and lane.lane == "thread:cpu-worker-2" and lane.stream is None
    with pytest.raises(BackendError):
        be.lanes(3)
    host = ints_to_limbs(list(range(64)))
    p = be.pin(host)
    try:
        assert np.array_equal(p.array, host) and p.nbytes == host.nbytes
    finally:
        be.unpin(p)
    staged = CpuBackend(1, try_mlock=False).pin(host)
    assert staged.pinned is False and staged.array is not host and np.array_equal(staged.array, host)


def test_make_backend_auto_falls_back_with_notice():
    be, notice = make_backend("cpu", 2)
    assert be.name == "cpu" and notice is None
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy present: fallback not exercised")
    except ImportError:
        pass
    be, notice = make_backend("auto", 1)
    assert be.name == "cpu" and notice and "CPU" in notice
    with pytest.raises(ValueError):
        make_backend("tpu", 1)


class LimbBackend(CpuBackend):
    """Test double with the CUDA backend's data layout: device arrays stay ``uint64`` limbs ``(rows, n, 4)``
    between calls (arithmetic borrowed from the CPU backend). Proves the pipeline only touches device data
    through the interface (``rows``, slicing of ``data`` as an array) and works with that layout."""

    name = "limbs"

    def h2d(self, host, device, lane=None):
        arr = host.array if hasattr(host, "array") else host
        from gputrace.prover.backends.base import DeviceArray

        return DeviceArray(np.array(arr, copy=True), device, arr.shape)

    def d2h(self, arr, lane=None):
        return np.array(arr.data, copy=True)

    def _obj(self, x):
        return super().h2d(np.ascontiguousarray(x.data), x.device)

    def _lim(self, x):
        from gputrace.prover.backends.base import DeviceArray

        out = super().d2h(x)
        return DeviceArray(out, x.device, out.shape)

    def ntt(self, x, *, inverse, coset, lane=None):
        return self._lim(super().ntt(self._obj(x), inverse=inverse, coset=coset))

    def h_eval(self, a, b, c, *, lane=None):
        return self._lim(super().h_eval(self._obj(a), self._obj(b), self._obj(c)))

    loaded: list = []

    def load_bases(self, name, points, device, affine_limbs=None):
        """Like the CUDA backend: takes the key's limbs when given; records them to check they are the points."""
        from gputrace.prover.encoding import g1_to_affine_limbs

        assert affine_limbs is not None, f"pipeline gave no affine limbs for {name}"
        assert np.array_equal(affine_limbs, g1_to_affine_limbs(list(points))), name
        self.loaded.append((name, device))
        return super().load_bases(name, points, device)

    def msm_g1(self, bases, scalars, *, plan=None, lane=None):
        data = scalars.data if hasattr(scalars, "data") and not isinstance(scalars, np.ndarray) else scalars
        assert isinstance(data, np.ndarray) and data.dtype == np.uint64 and data.shape[-1] == 4
        return super().msm_g1(bases, data.reshape(-1, 4), plan=plan)


class DeviceWorkBackend(LimbBackend):
    """The GPU-layout double that also generates witnesses "on the device" (``witness_plan.plan_witness``)
    and runs ``b_g2`` as a device G2 MSM (arkworks), like the CUDA backend: exercises the pipeline's device
    synthesis and device ``b_g2`` paths without a GPU."""

    name = "devwork"
    supports_device_witness = True
    supports_g2 = True
    g2_loaded: list = []

    def device_witness(self, plans, domain_size, device, lane=None, per_circuit=False):
        from gputrace.prover.backends.base import DeviceArray
        from gputrace.prover.witness_plan import plan_witness

        ws = [plan_witness(p, domain_size) for p in plans]
        abc = np.ascontiguousarray(np.stack([w.abc for w in ws], axis=0 if per_circuit else 1)
                                   .reshape(3 * len(ws), domain_size, 4))
        return DeviceArray(abc, device, abc.shape), [DeviceArray(w.z_limbs.copy(), device, w.z_limbs.shape) for w in ws]

    def load_bases_g2(self, name, affine_limbs, device):
        from py_arkworks_bls12381 import G2Point

        from gputrace.prover.backends.base import BasesHandle

        raw = np.ascontiguousarray(affine_limbs, dtype="<u8").tobytes()
        pts = [G2Point.from_xy_bytes_unchecked_le(raw[192 * i: 192 * (i + 1)]) for i in range(len(affine_limbs))]
        self.g2_loaded.append((name, device))
        return BasesHandle(name, device, len(pts), pts)

    def msm_g2(self, bases, scalars, *, lane=None):
        from py_arkworks_bls12381 import G2Point

        from gputrace.prover.field import limbs_to_scalars

        data = scalars.data if not isinstance(scalars, np.ndarray) else scalars
        assert isinstance(data, np.ndarray) and data.dtype == np.uint64
        return G2Point.multiexp_unchecked(bases.data[: len(data)], limbs_to_scalars(data))


@pytest.mark.parametrize("synthesis,b_g2", [("device", "device"), ("device", "host"), ("host", "device")])
@pytest.mark.slow
def test_pipeline_device_synthesis_and_g2_paths(tmp_path_factory, synthesis, b_g2):
    """Device synthesis and device b_g2 (alone and together) give verifying proofs with the phases on the device
    lane; the trace's config records where each ran."""
    from pathlib import Path

    import gputrace
    from gputrace.prover.options import ProveOptions
    from gputrace.prover.pipeline import run_prove

    be = DeviceWorkBackend(2)
    be.loaded, be.g2_loaded = [], []
    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=2, depth=3, batch=2, backend_object=be, opts=frozenset({"d4", "a4"}),
                                     synthesis=synthesis, b_g2=b_g2, out_dir=Path(tmp_path_factory.mktemp("dev")),
                                     key_dir=tmp_path_factory.getbasetemp() / "dev-keys", configure_tracer=False))
    finally:
        gputrace.shutdown()
    assert res.verified == [True] * 4
    assert (res.config["synthesis"], res.config["b_g2"]) == (synthesis, b_g2)
    lanes = {}
    for sp in sink.spans:
        lanes.setdefault(sp["name"], set()).add(sp["attributes"].get("gputrace.lane"))
    dev_lanes = {f"thread:cpu-worker-{d}" for d in (0, 1)}
    assert (lanes["synthesis"] <= dev_lanes) == (synthesis == "device"), lanes["synthesis"]
    assert (lanes["b_g2"] <= dev_lanes) == (b_g2 == "device"), lanes["b_g2"]
    waits = {sp["attributes"].get("waits_for") for sp in sink.spans if sp["name"] == "sync"}
    assert ("b_g2" in waits) == (b_g2 == "host"), waits
    assert sorted(be.g2_loaded) == ([("b_g2", 0), ("b_g2", 1)] if b_g2 == "device" else [])


def test_device_work_refused_by_a_backend_without_it(tmp_path):
    from gputrace.prover.options import ProveOptions
    from gputrace.prover.pipeline import run_prove

    for what in ("synthesis", "b_g2"):
        with pytest.raises(ValueError, match=f"{what}='device': the cpu backend"):
            run_prove(ProveOptions(challenges=1, depth=2, backend="cpu", out_dir=tmp_path, configure_tracer=False,
                                   **{what: "device"}))
    with pytest.raises(ValueError, match="synthesis must be"):
        run_prove(ProveOptions(challenges=1, depth=2, backend="cpu", out_dir=tmp_path, configure_tracer=False,
                               synthesis="gpu"))


@pytest.mark.slow
def test_pipeline_with_gpu_layout_backend(tmp_path_factory):
    from pathlib import Path

    from gputrace.prover.options import ProveOptions
    from gputrace.prover.pipeline import run_prove

    for rnd in range(2):  # keys generated (raw from setup), then cached (raw from pk.npz)
        be = LimbBackend(2)
        be.loaded = []
        res = run_prove(ProveOptions(challenges=1, depth=2, batch=2, backend_object=be, opts=frozenset({"b1", "d4"}),
                                     out_dir=Path(tmp_path_factory.mktemp("limbs")),
                                     key_dir=tmp_path_factory.getbasetemp() / "limb-keys", configure_tracer=False))
        assert res.verified == [True] * 4 and res.backend == "limbs" and res.config["devices"] == 2
        assert res.key_cached == (rnd == 1)
        assert sorted(be.loaded) == sorted((n, d) for n in ("a", "b_g1", "l", "h") for d in (0, 1))


def test_pipeline_closes_backend_when_output_dir_is_unusable(tmp_path):
    from gputrace.prover.options import ProveOptions
    from gputrace.prover.pipeline import run_prove

    class Closing(CpuBackend):
        closed = 0

        def close(self):
            Closing.closed += 1
            super().close()

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(OSError):
        run_prove(ProveOptions(challenges=1, depth=2, batch=1, backend_object=Closing(1), out_dir=blocker / "out",
                               key_dir=tmp_path / "keys", configure_tracer=False))
    assert Closing.closed == 1


def test_affine_limbs_only_with_matching_raw(tmp_path):
    import dataclasses

    from gputrace.prover.circuit import validate_shape
    from gputrace.prover.encoding import g1_to_affine_limbs, g2_to_affine_limbs
    from gputrace.prover.keygen.cache import get_keys
    from gputrace.prover.keygen.keys import load_pk

    ks = get_keys(validate_shape(1, 2), tmp_path, seed=1)
    for pk in (ks.pk, load_pk(ks.directory / "pk.npz")):  # raw from setup, then from pk.npz
        for name in ("a", "b_g1", "l", "h"):
            assert np.array_equal(pk.affine_limbs(name), g1_to_affine_limbs(getattr(pk, name)))
        assert np.array_equal(pk.affine_limbs("b_g2"), g2_to_affine_limbs(pk.b_g2))
    pk = ks.pk
    assert dataclasses.replace(pk, raw=None).affine_limbs("a") is None
    short = dict(pk.raw, a=np.frombuffer(pk.raw["a"], np.uint8)[:-96])  # a raw block that is not the query: not used
    assert dataclasses.replace(pk, raw=short).affine_limbs("a") is None


def test_loaded_key_keeps_query_rows_and_saves_identically(tmp_path):
    """A loaded key keeps the query rows (for load_bases and load_bases_g2); saving it again writes the same
    arrays."""
    from gputrace.prover.circuit import validate_shape
    from gputrace.prover.keygen.cache import get_keys
    from gputrace.prover.keygen.keys import load_pk, load_vk, save_keys

    ks = get_keys(validate_shape(1, 2), tmp_path / "k", seed=1)
    pk = load_pk(ks.directory / "pk.npz")
    assert set(pk.raw) == {"a", "b_g1", "b_g2", "l", "h"}
    vk, _ = load_vk(ks.vk_path)
    save_keys(tmp_path / "again", pk, vk, "merkle-poseidon-t3", {})
    with np.load(ks.directory / "pk.npz") as a, np.load(tmp_path / "again" / "pk.npz") as b:
        for name in ("a", "b_g1", "b_g2", "l", "h", "fixed_g1", "fixed_g2"):
            assert np.array_equal(a[name], b[name]), name
