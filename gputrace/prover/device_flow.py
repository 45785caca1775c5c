"""The stream flow of a device worker (``ProveOptions.device_flow="stream"``, the default with device synthesis).

What each device's worker thread does with its circuits (issue 13's host share taken off the workers; every
step is a phase of the trace):

* Witnesses are made on the backend's witness lane (``witness_lane``: a second CUDA stream), for every plan that
  is ready, in one ``synthesis`` chunk (one launch per tree level for all of them), each circuit into its own
  ``(3, n, 4)`` block; the split of each assignment for the tail MSMs (``split_tail``: ones zeroed, D4's
  counters) is queued right after, then an event. Later chunks are launched as their plans arrive, while the
  lane proves the circuits before them.
* The lane waits for that event on the device (no host wait) and proves the circuit alone: ``ntt`` ->
  ``msm_h`` -> ``d2h`` of eight counters (the ones' indices stay on the device) -> ``msm_a``, ``msm_b_g1``,
  ``msm_l`` (the device tail; D4 plans from the counters) -> ``batch_add`` (device indices) -> ``b_g2`` (device
  z) -> the root read back (32 bytes): the order the keys arrive in (``LOAD_ORDER``). ``assemble`` runs on a
  helper thread, so the lane goes on to the next circuit.
* The assignment never comes back to the host, unless ``b_g2`` runs there (then its one ``d2h``, and
  ``publish`` hands the host z to the ``b_g2`` pool).
* Waiting for a plan or for a proving-key query that ``LoadingBases`` is still loading is a ``sync`` span
  (``waits_for="witness_plan"`` / ``"load_bases"``).

Device arrays made on the witness lane and read on the lane stay referenced until the lane has synchronised
past their last use (the MSMs return host points), so the stream-ordered memory pool cannot hand their blocks
to other work early (backends/cuda.py, "Streams").

Threads: ``stream_work`` runs on one device's worker thread; ``LoadingBases.start`` starts one loading thread.
Raises whatever the backend raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backends.base import DeviceArray, LaneInfo, ProverBackend
from .field import limbs_to_ints
from .tail_split import plans_from_stats
from .witness import Witness

#: Witnesses are made at most this many circuits ahead of the one being proven, and within ``AHEAD_BYTES`` of
#: device memory (a/b/c block, z and tail: ~160 B per domain row), so a batch of 1024 does not make 1024 at once.
MAX_AHEAD = 8
AHEAD_BYTES = 2 << 30

#: The order the first circuit needs the proving-key queries in (``msm_h``, ``msm_a``, ``msm_b_g1``, ``msm_l``,
#: ``b_g2``): each upload runs while the MSM before it does.
LOAD_ORDER = ("h", "a", "b_g1", "l", "b_g2")


class LoadingBases:
    """The proving-key queries of one device, loaded one after another on a thread of their own (``start``), in
    ``LOAD_ORDER``; ``get(name)`` returns a query's handle, waiting for it if needed (a ``sync`` span)."""

    def __init__(self, names: Sequence[str]) -> None:
        self._futures: dict[str, Future] = {name: Future() for name in names}
        self._thread: threading.Thread | None = None

    def start(self, load_one: Callable[[str], Any], name: str) -> None:
        """Load every query with ``load_one(name)`` on a new thread called ``name``; an error is kept for
        ``get`` (every query not loaded yet then raises it)."""

        def run() -> None:
            for key, fut in self._futures.items():
                try:
                    fut.set_result(load_one(key))
                except BaseException as exc:  # noqa: BLE001 - handed to get() on the worker's thread, re-raised there
                    for rest in self._futures.values():
                        if not rest.done():
                            rest.set_exception(exc)
                    return

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def get(self, name: str, stats, label: str, hkw: dict) -> Any:
        fut = self._futures[name]
        if not fut.done():
            with stats.phase("sync", label, **dict(hkw, kind="sync", waits_for="load_bases", query=name)):
                return fut.result()
        return fut.result()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def loaded(self) -> bool:
        """True once every query is loaded (or failed)."""
        return all(f.done() for f in self._futures.values())

    def handles(self) -> list:
        """The loaded queries' handles (those done without error), to keep their device copies alive."""
        return [f.result() for f in self._futures.values() if f.done() and f.exception() is None]


@dataclass
class FlowSwitches:
    """The regression switches the queued stream flow acts on (docs/prover.md, "Regression switches"); every one
    is a real code path, none emulates a cost.

    * ``pin_rows`` (B1): host buffers registered (``backend.pin``) before each circuit is queued and unregistered
      once its uploads are done: the proving-key rows the proof's uploads read (GBs from 2^22).
    * ``reload`` (``reload``): ``reload(j)`` starts loading circuit ``j``'s key queries afresh (read again from
      ``pk.npz`` and uploaded) and returns their ``LoadingBases``; circuit 0 uses the run's first load. Each
      circuit's device copies are kept with its results and released after them.
    * ``g2end`` (``g2end``): no ``b_g2`` per circuit; after the last circuit's G1 work the worker runs every
      circuit's G2 MSM, each returning its host point, and the proofs wait for them.
    * ``sync_msm`` (``syncmsm``): the worker synchronises the lane after every MSM (a ``sync`` span), so the host
      no longer queues ahead of the GPU (both stream flows).
    """

    pin_rows: Sequence[np.ndarray] = ()
    reload: Callable[[int], LoadingBases] | None = None
    g2end: bool = False
    sync_msm: bool = False


def stream_work(o, backend: ProverBackend, lane: LaneInfo, bases: LoadingBases, pk, plans: Sequence[Future],
                publish: Callable[[Witness], None], b_g2_host: list[Future] | None, stats, ctx,
                assemble: Callable[..., Any], queued: bool = True, switches: FlowSwitches | None = None) -> list:
    """Prove one device's circuits from their plan futures (in order); returns one proof per circuit.

    ``b_g2_host``: the host pool's G2 futures by circuit, or None for the device G2 MSM. ``assemble(pk, a, b1,
    l, h, b2)`` makes the proof (run on a helper thread). ``stats.phase(name, label, **attrs)`` opens a phase.
    ``queued`` (``device_flow="stream"``): every MSM's result stays on the device and the host never waits inside
    a circuit; one ``collect`` per circuit copies the results (and the root) back behind an event, and the helper
    thread waits for it (a ``sync`` span on its lane) before ``assemble``, so the worker goes on to queue the next
    circuit while the GPU works. False (``"stream-sync"``): each MSM returns its host point (a ``d2h`` and a
    ``sync`` per call), the flow before. ``switches``: the regression switches (``FlowSwitches``).
    """
    return _StreamWorker(o, backend, lane, bases, pk, plans, publish, b_g2_host, stats, ctx, assemble,
                         switches).run(queued)


class _StreamWorker:
    """``stream_work``'s state for one device: span attributes of its lanes, the witnesses made ahead (``made``),
    and the helper thread that assembles proofs. Runs on the device's worker thread (``assembled`` and
    ``finished`` on the helper)."""

    def __init__(self, o, backend: ProverBackend, lane: LaneInfo, bases: LoadingBases, pk, plans: Sequence[Future],
                 publish: Callable[[Witness], None], b_g2_host: list[Future] | None, stats, ctx,
                 assemble: Callable[..., Any], switches: FlowSwitches | None = None) -> None:
        self.backend, self.lane, self.bases, self.pk, self.plans = backend, lane, bases, pk, plans
        self.sw = switches or FlowSwitches()
        self.reloads: list[LoadingBases] = []  # ``reload``: every circuit's own loader, joined at the end
        self.g2_later: list[tuple[int, Any, dict, dict, Future]] = []  # ``g2end``: (circuit, z, ckw, ccw, future)
        self.publish, self.b_g2_host, self.stats, self.assemble = publish, b_g2_host, stats, assemble
        self.dl = f"{backend.name}:{lane.index}"
        self.wl = backend.witness_lane(lane.index)
        kw: dict[str, Any] = dict(device=lane.device, lane=lane.lane, stream=lane.stream, batch=0)
        if lane.stream is None:
            kw["kind"] = "host"
        self.kw = kw
        self.top = dict(kw, parent=ctx)
        self.hkw = {k: v for k, v in self.top.items() if k != "stream"}
        wl = self.wl
        wtop: dict[str, Any] = dict(device=wl.device, lane=wl.lane, stream=wl.stream, batch=0, parent=ctx)
        if wl.stream is None:
            wtop["kind"] = "host"
        self.wtop = wtop
        self.n, self.nb = pk.domain_size, len(plans)
        # MSM plans: the ``windows`` switch's rule, else D4's, else none (the engine's windows).
        self.d4: str | None = "seed" if "windows" in o.opts else "d4" if "d4" in o.opts else None
        self.made: dict[int, tuple] = {}
        self.nxt = 0
        self.ahead = max(1, min(MAX_AHEAD, AHEAD_BYTES // (160 * self.n)))
        self.helper_lane = f"thread:assemble-{lane.index}"

    def run(self, queued: bool) -> list:
        helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"assemble-{self.lane.index}")
        try:
            proofs = [self._circuit(j, helper, queued) for j in range(self.nb)]
            self._batched_g2()
            return [f.result() for f in proofs]
        finally:
            for *_, later in self.g2_later:  # an error before the batched G2 MSMs: release the helper thread
                if not later.done():
                    later.set_exception(RuntimeError("b_g2 not run: the device worker failed first"))
            helper.shutdown(wait=True, cancel_futures=True)
            for ld in self.reloads:  # no reload may still upload when the backend closes
                ld.join()

    def _batched_g2(self) -> None:
        """``g2end``: every circuit's G2 MSM now, one after another, each read back before the next is queued."""
        for _c, z, ckw, ccw, later in self.g2_later:
            with self.stats.phase("b_g2", self.dl, **dict(ckw, batched=True)):
                later.set_result(self.backend.msm_g2(self.bases.get("b_g2", self.stats, self.dl, ccw), z,
                                                     lane=self.lane))
        self.g2_later.clear()

    def make(self, cur: int) -> None:
        """Queue the witnesses of plans nxt.. on the witness lane: circuit ``cur`` if not made yet (waiting for
        its plan), then every further one whose plan is made, up to ``ahead`` circuits from ``cur``."""
        plans, stats, backend = self.plans, self.stats, self.backend
        js: list[int] = []
        j = self.nxt
        while j < self.nb and j < cur + self.ahead and (j == cur or plans[j].done()):
            js.append(j)
            j += 1
        if not js:
            return
        got = []
        for j in js:
            if not plans[j].done():
                with stats.phase("sync", self.dl, **dict(self.hkw, kind="sync", waits_for="witness_plan")):
                    plans[j].result()
            got.append(plans[j].result())
        attrs = dict(self.wtop, circuits=len(got), where="device", constraints=got[0].num_constraints)
        if len(got) == 1:
            attrs["circuit"] = got[0].circuit
        with stats.phase("synthesis", self.dl, **attrs):
            abc, zs = backend.device_witness(got, self.n, self.lane.index, self.wl, per_circuit=True)
            splits = [backend.split_tail(z, p.num_inputs, self.wl) for z, p in zip(zs, got, strict=True)]
            ready = backend.record_event(self.wl)
        for i, j in enumerate(js):
            self.made[j] = (backend.rows(abc, 3 * i, 3 * i + 3), zs[i], splits[i], ready, got[i])
        self.nxt = js[-1] + 1

    def assembled(self, circuit: int, parts: tuple) -> Any:
        with self.stats.phase("assemble", self.dl, **dict(self.hkw, circuit=circuit, lane=self.helper_lane)):
            return self.assemble(self.pk, *parts)

    def finished(self, circuit: int, handle, public_tail: list[int], ni: int, m: int, g2f: Future | None,
                 g2_queued: bool = True) -> Any:
        """On the helper thread: wait for circuit's queued results, publish its witness, assemble its proof.
        ``g2f``: the G2 point's future (host pool, or ``g2end``'s later device MSM: then ``g2_queued`` is False and
        the results hold the root alone after the G1 items)."""
        stats, dl, hkw = self.stats, self.dl, self.hkw
        with stats.phase("sync", dl, **dict(hkw, circuit=circuit, kind="sync", waits_for="results",
                                            lane=self.helper_lane)):
            vals = self.backend.results(handle)
        mh, ma, mb, ml, ba, bb, bl = vals[:7]
        if g2f is None or not g2_queued:
            root = limbs_to_ints(vals[8] if g2f is None else vals[7])[0]
            self.publish(Witness(circuit, [root] + public_tail, None, None, ni, m))
        if g2f is None:
            g2 = vals[7]
        else:
            with stats.phase("sync", dl, **dict(hkw, circuit=circuit, kind="sync", waits_for="b_g2",
                                                lane=self.helper_lane)):
                g2 = g2f.result()
        return self.assembled(circuit, (ma + ba, mb + bb, ml + bl, mh, g2))

    def _circuit(self, j: int, helper: ThreadPoolExecutor, queued: bool) -> Future:
        """Prove circuit j (made here if not made yet, with the ready plans after it); its proof's future. The
        circuit's device arrays are dropped when this returns: in the queued flow its collect handle holds them
        until the lane is past them; in the sync flow the lane has synchronised past every use (each MSM returns
        a host point), so only then may their blocks go back to the pool."""
        backend, lane, stats, dl, sw = self.backend, self.lane, self.stats, self.dl, self.sw
        bases = self.bases
        if sw.reload is not None and j > 0 and queued:  # this circuit's keys, read and uploaded again
            bases = sw.reload(j)
            self.reloads.append(bases)
        self.make(j)
        block, z, split, ready, plan = self.made.pop(j)
        backend.wait_event(lane, ready)
        ni, m, c = plan.num_inputs, plan.num_constraints, plan.circuit
        ckw = dict(self.top, circuit=c)
        ccw = dict(self.hkw, circuit=c)
        public_tail = [int(x) for x in plan.indices]
        if self.b_g2_host is not None:  # the host's G2 MSM needs the assignment: its one copy back
            with stats.phase("d2h", dl, **dict(ckw, bytes=z.nbytes, what="assignment")):
                zh = backend.d2h(z, lane)
            self.publish(Witness(c, [limbs_to_ints(zh[1:2])[0]] + public_tail, zh, None, ni, m))
        block, h = quotient_h(backend, block, 1, lane, stats, dl, ckw, self.kw)
        if queued:
            pinned = []
            if sw.pin_rows:  # B1: the proof's host buffers page-locked for it
                nbytes = sum(int(r.nbytes) for r in sw.pin_rows)
                with stats.phase("pin", dl, **dict(ccw, kind="pin", bytes=nbytes)) as p:
                    pinned = [backend.pin(r) for r in sw.pin_rows]
                    p.set("pinned", all(x.pinned for x in pinned))
            later: Future | None = Future() if sw.g2end and self.b_g2_host is None else None
            fut = _queue_circuit(backend, lane, bases, stats, dl, ckw, ccw, helper, self.finished, plan, block,
                                 h, z, split, self.d4, self.n, self.b_g2_host, sw, later)
            if later is not None:
                self.g2_later.append((c, z, ckw, ccw, later))
            if pinned:  # unregistered only once no upload of this circuit's keys can still read them
                if not bases.loaded():
                    with stats.phase("sync", dl, **dict(ccw, kind="sync", waits_for="load_bases")):
                        bases.join()
                with stats.phase("unpin", dl, **dict(ccw, kind="pin", bytes=sum(x.nbytes for x in pinned))):
                    for x in pinned:
                        backend.unpin(x)
            return fut
        mh, ts, ma, mb, ml, ba, bb, bl, row = _circuit_msms(backend, lane, self.bases, stats, dl, ckw, ccw, h, split,
                                                            self.d4, self.n, ni, queued=False,
                                                            sync_each=sw.sync_msm)
        if self.b_g2_host is None:
            with stats.phase("b_g2", dl, **ckw):
                g2 = backend.msm_g2(self.bases.get("b_g2", stats, dl, ccw), z, lane=lane)
            root = limbs_to_ints(backend.d2h(backend.rows(z, 1, 2), lane))[0]
            self.publish(Witness(c, [root] + public_tail, None, None, ni, m))
        else:
            with stats.phase("sync", dl, **dict(ccw, kind="sync", waits_for="b_g2")):
                g2 = self.b_g2_host[c].result()
        return helper.submit(self.assembled, c, (ma + ba, mb + bb, ml + bl, mh, g2))


def _queue_circuit(backend: ProverBackend, lane: LaneInfo, bases: LoadingBases, stats, dl: str, ckw: dict, ccw: dict,
                   helper: ThreadPoolExecutor, finished: Callable[..., Any], plan, block: DeviceArray, h: DeviceArray,
                   z: DeviceArray, split, d4: str | None, n: int, b_g2_host: list[Future] | None,
                   sw: FlowSwitches | None = None, g2_later: Future | None = None) -> Future:
    """Queue one circuit's MSMs (the queued flow of ``stream_work``) and hand its results to the helper thread.
    The host waits only for the witness lane's counters (``finish_tail``) and for keys still loading; every GPU
    phase's host bracket is the time to queue it, its device bracket (CUDA events) the GPU's. ``sw``: the
    regression switches; ``g2_later`` (``g2end``): leave ``b_g2`` out, the worker sets this future after the
    batch's G1 work."""
    sw = sw or FlowSwitches()
    ni, m, c = plan.num_inputs, plan.num_constraints, plan.circuit
    public_tail = [int(x) for x in plan.indices]
    mh, ts, ma, mb, ml, ba, bb, bl, row = _circuit_msms(backend, lane, bases, stats, dl, ckw, ccw, h, split, d4,
                                                        n, ni, queued=True, sync_each=sw.sync_msm)
    items = [mh, ma, mb, ml, ba, bb, bl]
    if b_g2_host is None:
        if g2_later is None:
            with stats.phase("b_g2", dl, **ckw):
                items.append(backend.msm_g2_queued(bases.get("b_g2", stats, dl, ccw), z, lane=lane))
            _sync_after_msm(backend, lane, stats, dl, ccw, sw.sync_msm)
        items.append(backend.d2h_queued(backend.rows(z, 1, 2), lane))  # the root, a public input
    # ``reload``: this circuit's own key copies stay referenced until the lane is past the MSMs that read them.
    keys = bases.handles() if sw.reload is not None else None
    handle = backend.collect(items, lane, keep=(block, h, z, split, ts, row, keys))
    g2f = b_g2_host[c] if b_g2_host is not None else g2_later
    return helper.submit(finished, c, handle, public_tail, ni, m, g2f, g2_later is None)


def _sync_after_msm(backend: ProverBackend, lane: LaneInfo, stats, dl: str, ccw: dict, on: bool) -> None:
    """``syncmsm``: the host waits for the lane (everything queued so far) in a ``sync`` span."""
    if on:
        with stats.phase("sync", dl, **dict(ccw, kind="sync", waits_for="msm")):
            backend.synchronize(lane.index)


def _circuit_msms(backend: ProverBackend, lane: LaneInfo, bases: LoadingBases, stats, dl: str, ckw: dict, ccw: dict,
                  h: DeviceArray, split, d4: str | None, n: int, ni: int, *, queued: bool,
                  sync_each: bool = False) -> tuple:
    """One circuit's G1 MSMs and batch additions in the order the keys arrive (LOAD_ORDER: on the first circuit
    each MSM overlaps the next upload), with the tail counters read behind the witness lane's event.
    ``queued``: the backend's ``*_queued`` calls (device handles, nothing read back); else each returns its host
    point. Returns ``(mh, ts, ma, mb, ml, ba, bb, bl, row)``; ``row`` (h's view) must outlive the MSMs.
    ``sync_each`` (``syncmsm``): a lane synchronisation after each MSM."""
    msm = backend.msm_g1_queued if queued else backend.msm_g1
    batch_add = backend.batch_add_queued if queued else backend.batch_add_indices
    with stats.phase("msm_h", dl, **ckw):
        # h has degree n-2: its top coefficient is zero and the key has n-1 bases.
        row = backend.rows(h, 0, 1)
        mh = msm(bases.get("h", stats, dl, ccw), DeviceArray(row.data[0, :n - 1], row.device, (n - 1, 4)), lane=lane)
    _sync_after_msm(backend, lane, stats, dl, ccw, sync_each)
    with stats.phase("d2h", dl, **dict(ckw, what="tail counters")):  # 8 counters, behind the witness's event
        ts = backend.finish_tail(split, lane)
    assert ts.ones is not None and ts.ones_l is not None, "finish_tail fills ones and ones_l"
    nv = ts.tail.shape[0]
    plan_l, plan_ab = plans_from_stats(ts.stats, d4) if d4 else (None, None)  # d4: the plan rule, or None
    with stats.phase("msm_a", dl, **ckw):
        ma = msm(bases.get("a", stats, dl, ccw), ts.tail, plan=plan_ab, lane=lane)
    _sync_after_msm(backend, lane, stats, dl, ccw, sync_each)
    with stats.phase("msm_b_g1", dl, **ckw):
        mb = msm(bases.get("b_g1", stats, dl, ccw), ts.tail, plan=plan_ab, lane=lane)
    _sync_after_msm(backend, lane, stats, dl, ccw, sync_each)
    with stats.phase("msm_l", dl, **ckw):
        ml = msm(bases.get("l", stats, dl, ccw), backend.rows(ts.tail, ni, nv), plan=plan_l, lane=lane)
    _sync_after_msm(backend, lane, stats, dl, ccw, sync_each)
    with stats.phase("batch_add", dl, **ckw):
        ba = batch_add(bases.get("a", stats, dl, ccw), ts.ones, bound=nv, lane=lane)
        bb = batch_add(bases.get("b_g1", stats, dl, ccw), ts.ones, bound=nv, lane=lane)
        bl = batch_add(bases.get("l", stats, dl, ccw), ts.ones_l, bound=nv - ni, lane=lane)
    return mh, ts, ma, mb, ml, ba, bb, bl, row


def quotient_h(backend: ProverBackend, block: DeviceArray, circuits: int, lane: LaneInfo, stats, dl: str, top: dict,
               kw: dict) -> tuple[DeviceArray, DeviceArray]:
    """The ``ntt`` phase and its four children for ``circuits`` circuits whose a, b, c rows are stacked in
    ``block`` (a rows, then b rows, then c rows): ``(block in coset evaluation form, h coefficients)``, queued on
    ``lane``. Shared by the batch flow (all of a device's circuits at once) and the stream flow (one)."""
    nb = circuits
    with stats.phase("ntt", dl, **top):
        with stats.phase("intt_abc", dl, **kw):
            block = backend.ntt(block, inverse=True, coset=False, lane=lane)
        with stats.phase("coset_ntt", dl, **kw):
            block = backend.ntt(block, inverse=False, coset=True, lane=lane)
        with stats.phase("h_eval", dl, **kw):
            h = backend.h_eval(backend.rows(block, 0, nb), backend.rows(block, nb, 2 * nb),
                               backend.rows(block, 2 * nb, 3 * nb), lane=lane)
        with stats.phase("intt_h", dl, **kw):
            h = backend.ntt(h, inverse=True, coset=True, lane=lane)
    return block, h
