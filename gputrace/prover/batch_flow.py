"""The whole-batch device work of a worker: ``_device_work``, with host synthesis, and with device synthesis when
``ProveOptions.device_flow="batch"`` (the earlier flow, kept for A/B; the stream flows are ``device_flow.py``).

One device's circuits at once: the witnesses made on the device from their plans (one ``synthesis`` phase, each
assignment copied back) or the host witnesses' a/b/c uploaded (``pin`` with B1, ``h2d``); H for all 3B vectors
(``device_flow.quotient_h``); then per circuit ``msm_h``, ``batch_add``, the tail MSMs, ``b_g2`` on the device or a
``sync`` on the host pool's future, ``assemble``; ``unpin`` in ``finally``. The host share of each circuit
(``_tail_work``: the scalars that are 1, the zeroed tail, D4 plans) runs on helper threads while the device works.

Threads: ``_device_work`` runs on its device's worker thread; it starts up to two ``prep-<device>`` helper threads
and joins them before it returns. Raises whatever the backend raises; the RuntimeError of ``_host`` (a witness
without the host array a step needs) is a bug in the flow.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .assemble import _assemble
from .backends.base import LaneInfo, ProverBackend
from .device_flow import quotient_h
from .field import limbs_to_ints
from .keygen.setup import ProvingKey
from .msm_plan import plan_msm
from .options import ProveOptions
from .run_stats import _Stats
from .verify import Proof
from .witness import Witness


def _device_work(o: ProveOptions, backend: ProverBackend, lane: LaneInfo, bases: dict, pk: ProvingKey,
                 src: list, publish, b_g2: list[Future] | None, stats: _Stats, ctx) -> list[Proof]:
    """One device's batch: returns one proof per circuit (runs on that device's worker thread).

    ``src``: the circuits' ``Witness``es (host synthesis) or ``WitnessPlan``s (device synthesis: the
    ``synthesis`` phase is then a device phase, and each witness is handed to ``publish`` as soon as its
    assignment is back on the host, which starts its host ``b_g2``). ``b_g2``: the host pool's futures
    per circuit, or None for a device G2 MSM (``bases["b_g2"]``).
    """
    dl = f"{backend.name}:{lane.index}"
    kw = dict(device=lane.device, lane=lane.lane, stream=lane.stream, batch=0)
    if lane.stream is None:  # CPU lanes: say so in the span kind instead of the vocabulary's "gpu"
        kw["kind"] = "host"
    top = dict(kw, parent=ctx)  # top-level device phases: children of the prove root
    nb, n = len(src), pk.domain_size
    pinned = None
    prep_pool = None
    proofs: list[Proof] = []
    zdev: list = [None] * nb
    try:
        if src and not isinstance(src[0], Witness):
            with stats.phase("synthesis", dl, **dict(top, circuits=nb, where="device",
                                                     constraints=src[0].num_constraints)):
                dev, zdev = backend.device_witness(src, n, lane.index, lane)
                ws = []
                for plan, zd in zip(src, zdev, strict=True):
                    z = backend.d2h(zd, lane)  # canonical limbs: ones, D4 plans, a host b_g2
                    public = [limbs_to_ints(z[1:2])[0]] + [int(x) for x in plan.indices]
                    ws.append(Witness(plan.circuit, public, z, None, plan.num_inputs, plan.num_constraints))
            for w in ws:
                publish(w)
        else:
            ws = src
            # Layout [a_0..a_nb-1, b_0.., c_0..] so a, b and c are contiguous row blocks.
            host = np.ascontiguousarray(np.stack([_host(w.abc) for w in ws], axis=1).reshape(3 * nb, n, 4))
            if "b1" in o.opts:
                with stats.phase("pin", dl, **dict(top, bytes=host.nbytes, kind="pin")) as p:
                    pinned = backend.pin(host)
                    p.set("pinned", pinned.pinned)
                    p.set("pin.method", "page-locked" if pinned.pinned else "staging-copy")
            with stats.phase("h2d", dl, bytes=host.nbytes, **top):
                dev = backend.h2d(pinned if pinned is not None else host, lane.index, lane)
        # Host work per circuit (the scalars that are 1, the tail without them, D4 plans) on helper threads,
        # started now so it overlaps the device's NTT and MSMs instead of leaving the stream empty (numpy
        # releases the GIL in these array operations).
        prep_pool = ThreadPoolExecutor(max_workers=min(2, nb), thread_name_prefix=f"prep-{lane.index}")
        preps = [prep_pool.submit(_tail_work, w, "d4" in o.opts) for w in ws]
        dev, h = quotient_h(backend, dev, nb, lane, stats, dl, top, kw)
        for j, w in enumerate(ws):
            ckw = dict(top, circuit=w.circuit)
            with stats.phase("msm_h", dl, **ckw):
                # h has degree n-2: its top coefficient is zero and the key has n-1 bases.
                mh = backend.msm_g1(bases["h"], _coeffs(backend, h, j, n - 1), lane=lane)
            z, ni = _host(w.z_limbs), w.num_inputs
            ones, tail, plan_l, tplan = preps[j].result()
            with stats.phase("batch_add", dl, **ckw):
                ba = backend.batch_add_g1(bases["a"], ones, lane=lane)
                bb = backend.batch_add_g1(bases["b_g1"], ones, lane=lane)
                bl = backend.batch_add_g1(bases["l"], ones[ni:], lane=lane)
            with stats.phase("h2d", dl, bytes=tail.nbytes, what="tail scalars", **ckw):
                tdev = backend.h2d(tail, lane.index, lane)  # once for the three tail MSMs
            with stats.phase("msm_l", dl, **ckw):
                ml = backend.msm_g1(bases["l"], backend.rows(tdev, ni, len(tail)), plan=plan_l, lane=lane)
            with stats.phase("msm_a", dl, **ckw):
                ma = backend.msm_g1(bases["a"], tdev, plan=tplan, lane=lane)
            with stats.phase("msm_b_g1", dl, **ckw):
                mb = backend.msm_g1(bases["b_g1"], tdev, plan=tplan, lane=lane)
            hkw = {k: v for k, v in ckw.items() if k != "stream"}
            if b_g2 is None:
                with stats.phase("b_g2", dl, **ckw):
                    g2 = backend.msm_g2(bases["b_g2"], zdev[j] if zdev[j] is not None else z, lane=lane)
            else:
                with stats.phase("sync", dl, **dict(hkw, kind="sync", waits_for="b_g2")):
                    g2 = b_g2[w.circuit].result()
            with stats.phase("assemble", dl, **hkw):
                proofs.append(_assemble(pk, ma + ba, mb + bb, ml + bl, mh, g2))
    finally:
        if prep_pool is not None:
            prep_pool.shutdown(wait=True, cancel_futures=True)
        if pinned is not None:
            with stats.phase("unpin", dl, **dict(top, bytes=pinned.nbytes, kind="pin")):
                backend.unpin(pinned)
    return proofs


_ONE = np.array([1, 0, 0, 0], dtype=np.uint64)


def _host(a: np.ndarray | None) -> np.ndarray:
    """A witness's host array, where the flow guarantees there is one (a host synthesis, or a device witness
    copied back for host work); a ``None`` here is a bug in the flow."""
    if a is None:
        raise RuntimeError("prover flow: a host step was given a witness the device kept")
    return a


def _tail_work(w: Witness, d4: bool):
    """(ones, tail, L plan, A/B_G1 plan) of one circuit: the scalars that are 1 (``batch_add``), the assignment
    with them zeroed (the tail MSMs) and the D4 plans (None without D4; A and B_G1 share their scalars)."""
    z, ni = _host(w.z_limbs), w.num_inputs
    ones = np.all(z == _ONE, axis=1)
    tail = z.copy()
    tail[ones] = 0
    return ones, tail, plan_msm(tail[ni:]) if d4 else None, plan_msm(tail) if d4 else None


def _coeffs(backend: ProverBackend, h, j: int, count: int):
    """The first ``count`` coefficients of row ``j`` of the device array ``h`` (a device view)."""
    from .backends.base import DeviceArray

    row = backend.rows(h, j, j + 1)
    return DeviceArray(row.data[0, :count], row.device, (count, 4))
