"""One batch of a run: ``_Batch`` (its threads and pools, from witness plans to one proof per circuit).

``pipeline._prove_batch`` makes one and calls ``run`` once, on the caller's thread. Before the ``prove`` root it
makes the batch flow's witness plans and loads the keys' bases; under the root it starts the key loaders (stream
flows), the host work (synthesis threads waiting on their worker processes, the host ``b_g2`` pool), runs one worker
thread per device (``device_flow.stream_work`` in the stream flows, ``batch_flow._device_work`` otherwise) and
closes every pool. Threads it starts: ``plan`` (the batch flow's plans), ``load_bases`` (key uploads, per
device), ``reload-N`` (the ``reload`` switch), ``synth`` (host synthesis), ``b_g2-pool`` and ``b_g2-part`` (host G2
MSMs), one ``cpu-worker-N`` per device; each method's doc says where it runs.

Raises on the caller's thread what a key upload raised, or the first error of a device worker (backend errors,
``UnsatisfiedConstraint``). Interrupted or failing there, ``run`` cancels the run before it re-raises
(``_Stats.cancel``: no phase starts any more, so other threads may end with ``RunCancelled``) and joins every
thread of the batch first.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G2Point

import gputrace

from .assemble import _assemble
from .backends.base import ProverBackend
from .batch_flow import _device_work, _host
from .circuit import CircuitShape
from .device_flow import LOAD_ORDER, FlowSwitches, LoadingBases, stream_work
from .encoding import g2_to_affine_limbs
from .fixed_base import PointRows
from .host_msm import HostMsm, cpu_threads
from .keygen.setup import ProvingKey
from .options import ProveOptions
from .processes import fork_pool, stop
from .run_config import _where
from .run_stats import _Stats
from .verify import Proof
from .witness import Witness, merge_parts, split_challenges, synthesize_part, synthesize_witness
from .witness_plan import make_plan


class _Batch:
    """One batch of ``total`` circuits, in named steps: make the batch flow's witness plans, load the keys' bases,
    then under the ``prove`` root start the host work (synthesis, the host G2 MSMs), run one worker thread per
    device, and close every pool. ``run`` is called once, on the caller's thread; the other methods say where
    they run. ``witnesses``/``b_g2``: one future per circuit; ``results``: one proof per circuit.

    Interrupted (``KeyboardInterrupt`` on the caller's thread, or any error there), ``run`` cancels the run before
    it re-raises: no phase starts any more (``_Stats.cancel``), queued host work is dropped, the synthesis
    processes are ended, and every thread of the batch is joined, each at the end of the phase it is in. So the
    caller's cleanup (closing the backend, flushing the trace) runs with no thread of the batch left."""

    def __init__(self, o: ProveOptions, shape: CircuitShape, backend: ProverBackend, pk: ProvingKey, stats: _Stats,
                 total: int, stream_plans: list[Future] | None, pk_file: Path | None = None) -> None:
        self.o, self.shape, self.backend, self.pk, self.stats, self.total = o, shape, backend, pk, stats, total
        self.pk_file = pk_file
        backend.key_staging = "pageable" not in o.opts  # the ``pageable`` switch
        self.ndev = backend.device_count()
        self.cpus = cpu_threads()
        self.dev_synth = _where(o, "synthesis", backend.supports_device_witness, backend)
        self.dev_g2 = _where(o, "b_g2", backend.supports_g2, backend)
        self.stream_plans = stream_plans
        self.stream_flow = self.dev_synth and stream_plans is not None
        self.ctx = None  # the prove root's context, once inside it
        self.plans: list | None = None  # the batch flow's witness plan futures
        self.bases: list[dict] | None = None  # per device, loaded before the prove root (not in the stream flow)
        self.loaders: list[LoadingBases] = []
        self.witnesses: list[Future] = []
        self.b_g2: list[Future] = []
        self.results: list = [None] * total
        self.errors: list[BaseException] = []
        self.synth_pool: ThreadPoolExecutor | None = None
        self.procs: ProcessPoolExecutor | None = None
        self.g2_pool: ThreadPoolExecutor | None = None
        self.g2_msm: HostMsm | None = None
        self.ranges: list[tuple[int, int]] = []
        self.threads: list[threading.Thread] = []
        self._done = 0
        self._done_lock = threading.Lock()

    def run(self) -> tuple[list[Proof], list[list[int]]]:
        self.plans = self._start_batch_plans()
        self.bases = self._load_all()
        with gputrace.phase("prove", batch=0, circuits=self.total, devices=self.ndev, kind="host"):
            self.ctx = gputrace.current_context()
            failed = True
            try:
                self._start_loaders()
                self._start_host_work()
                self._submit_circuits()
                self._run_workers()
                failed = False
            finally:
                self._close(cancel=failed)
        return self.results, [wf.result().public_inputs for wf in self.witnesses]

    # -- before the prove root ----------------------------------------------------------------------------------
    def _start_batch_plans(self) -> list | None:
        """The batch flow: witness plans (pure Python) made on one thread while the bases load, in the order the
        devices take their circuits (device d: d*B .. d*B+B-1; interleaved so every device's first circuits come
        first). None in the other flows."""
        if not self.dev_synth or self.stream_flow:
            return None
        o = self.o
        plan_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")
        plans: list = [None] * self.total
        for j in range(o.batch):
            for d in range(self.ndev):
                i = d * o.batch + j
                plans[i] = plan_pool.submit(make_plan, self.shape, o.seed, i)
        plan_pool.shutdown(wait=False)
        return plans

    def _load(self, d: int) -> dict:
        """Proving-key queries resident on device d, once per run (before the prove root)."""
        backend, pk = self.backend, self.pk
        lane = backend.lanes(d)[0]
        points = len(pk.a) + len(pk.b_g1) + len(pk.l) + len(pk.h) + (len(pk.b_g2) if self.dev_g2 else 0)
        with self.stats.phase("load_bases", f"{backend.name}:{d}", device=lane.device, lane=lane.lane, kind="host",
                              points=points):
            out = {name: backend.load_bases(name, pts, d, affine_limbs=pk.affine_limbs(name)) for name, pts in
                   (("a", pk.a), ("b_g1", pk.b_g1), ("l", pk.l), ("h", pk.h))}
            if self.dev_g2:
                g2_limbs = pk.affine_limbs("b_g2")
                out["b_g2"] = backend.load_bases_g2(
                    "b_g2", g2_limbs if g2_limbs is not None else g2_to_affine_limbs(pk.b_g2), d)
        return out

    def _load_all(self) -> list[dict] | None:
        if self.stream_flow:
            return None  # loaded inside the prove root, while the first circuits start
        if self.ndev == 1:
            return [self._load(0)]
        # One thread per device: the uploads (and the devices' copy engines) run side by side.
        with ThreadPoolExecutor(max_workers=self.ndev, thread_name_prefix="load_bases") as ex:
            return list(ex.map(self._load, range(self.ndev)))

    # -- inside the prove root ----------------------------------------------------------------------------------
    def _load_query(self, d: int, name: str):
        """The stream flow: one query, on device d's loading thread."""
        backend, pk = self.backend, self.pk
        pts = getattr(pk, name)
        with self.stats.phase("load_bases", f"{backend.name}:{d}", device=backend.lanes(d)[0].device,
                              lane=f"thread:load_bases-{d}", kind="host", parent=self.ctx, query=name,
                              points=len(pts)):
            if name == "b_g2":
                g2_limbs = pk.affine_limbs("b_g2")
                return backend.load_bases_g2("b_g2", g2_limbs if g2_limbs is not None else g2_to_affine_limbs(pts), d)
            return backend.load_bases(name, pts, d, affine_limbs=pk.affine_limbs(name))

    def _reread_query(self, d: int, circuit: int, name: str):
        """``reload``: one query read again from ``pk.npz`` and uploaded (device d's reload thread). The span says
        which circuit it is for as ``for_circuit``, not ``circuit``: its time stays in the run's one ``load_bases``
        instance, so A/B comparisons (which align instances across runs) count it against the baseline's loads."""
        backend, pk = self.backend, self.pk
        pts = getattr(pk, name)
        with self.stats.phase("load_bases", f"{backend.name}:{d}", device=backend.lanes(d)[0].device,
                              lane=f"thread:reload-{d}", kind="host", parent=self.ctx, query=name, points=len(pts),
                              for_circuit=circuit, reload=True):
            if self.pk_file is None:  # _flow_switches refuses reload without it; kept for the type checker
                raise ValueError("the reload switch needs the key's pk.npz")
            with np.load(self.pk_file) as zf:
                rows = zf[name]
            limbs = np.frombuffer(np.ascontiguousarray(rows), dtype="<u8")
            if name == "b_g2":
                return backend.load_bases_g2("b_g2", limbs.reshape(-1, 2, 2, 6), d)
            return backend.load_bases(name, pts, d, affine_limbs=limbs.reshape(-1, 2, 6))

    def _reload(self, d: int, circuit: int) -> LoadingBases:
        """``reload``: circuit's keys loaded afresh on a thread of their own."""
        ld = LoadingBases([q for q in LOAD_ORDER if self.dev_g2 or q != "b_g2"])
        ld.start(functools.partial(self._reread_query, d, circuit), f"reload-{d}")
        return ld

    def _flow_switches(self, d: int) -> FlowSwitches:
        """The regression switches of device d's stream flow (``device_flow.FlowSwitches``)."""
        o = self.o
        reload = None
        if "reload" in o.opts:
            if self.pk_file is None:
                raise ValueError("the reload switch needs the key's pk.npz (run_prove passes it)")
            reload = functools.partial(self._reload, d)
        rows: list[np.ndarray] = []
        if "b1" in o.opts:  # the key rows as the uploads read them (views of ``pk.raw``)
            limbs = [self.pk.affine_limbs(q) for q in LOAD_ORDER if self.dev_g2 or q != "b_g2"]
            rows = [x for x in limbs if x is not None]
        return FlowSwitches(pin_rows=rows, reload=reload, g2end="g2end" in o.opts, sync_msm="syncmsm" in o.opts)

    def _start_loaders(self) -> None:
        if not self.stream_flow:
            return
        for d in range(self.ndev):
            ld = LoadingBases([q for q in LOAD_ORDER if self.dev_g2 or q != "b_g2"])
            ld.start(functools.partial(self._load_query, d), f"load_bases-{d}")
            self.loaders.append(ld)

    def _start_host_work(self) -> None:
        """The host pools: synthesis threads (each waiting for its circuit's processes) and the G2 MSMs."""
        o, total = self.o, self.total
        workers = max(1, o.synthesis_workers or self.cpus)
        nsynth = min(total, workers)
        # Challenge ranges per circuit: at most K, so no process is started that no part can use.
        self.ranges = split_challenges(self.shape.challenges, max(1, min(workers // total, self.shape.challenges)))
        if not self.dev_synth:
            self.synth_pool = ThreadPoolExecutor(max_workers=nsynth, thread_name_prefix="synth")
            if workers > 1:
                self.procs = _synthesis_processes(nsynth * len(self.ranges))
        if not self.dev_g2:
            g2_workers = max(1, min(total, self.cpus)) if "a4" in o.opts else 1
            self.g2_pool = ThreadPoolExecutor(max_workers=g2_workers, thread_name_prefix="b_g2-pool")
            self.g2_msm = HostMsm(self.cpus, thread_name_prefix="b_g2-part")
            # First on the b_g2 pool: the G2 bases decoded (a lazy key query, about a second at 2^20) while the
            # circuits synthesize in processes that leave this GIL free, not after, inside the first b_g2.
            if isinstance(self.pk.b_g2, PointRows) and not self.pk.b_g2.decoded:
                self.g2_pool.submit(self._decode_g2_bases, self.pk.b_g2)

    def _decode_g2_bases(self, query: PointRows) -> None:
        """On the b_g2 pool, before any circuit's ``b_g2``: the key's G2 query decoded into arkworks points, as
        a ``load_bases`` span (``query=b_g2``) on the pool's lane, so a trace shows what it costs."""
        lane = f"thread:b_g2-pool-{_slot(threading.current_thread().name)}"
        with self.stats.phase("load_bases", "host", device=-1, lane=lane, parent=self.ctx, kind="host",
                              query="b_g2", points=len(query)):
            query.points()

    def _submit_circuits(self) -> None:
        for i in range(self.total):
            # Device synthesis: the device worker sets the future when the circuit's witness is back.
            wf: Future = Future() if self.synth_pool is None else self.synth_pool.submit(self._synth, i)
            self.witnesses.append(wf)
            if self.g2_pool is not None:
                self.b_g2.append(self.g2_pool.submit(self._g2, wf))

    def _progress(self, event: str) -> None:
        if self.o.progress is not None:
            with self._done_lock:
                self._done += 1
                n = self._done
            self.o.progress(event, n, 2 * self.total)

    def _synth(self, i: int) -> Witness:
        """On a synth thread: circuit i's host synthesis (in the processes, cut into ``ranges``, when there are)."""
        o, shape, nparts = self.o, self.shape, len(self.ranges)
        lane = f"thread:synth-{_slot(threading.current_thread().name)}"
        with self.stats.phase("synthesis", "host", circuit=i, batch=0, device=-1, lane=lane, parent=self.ctx,
                              constraints=shape.constraints, parts=nparts):
            if self.procs is None:
                w = synthesize_witness(shape, o.seed, i, self.pk.domain_size, o.opts)
            else:  # nparts processes per synth thread, so its parts start at once
                jobs = [self.procs.submit(synthesize_part, shape, o.seed, i, o.opts, lo, hi) for lo, hi in self.ranges]
                w = merge_parts(shape, i, self.pk.domain_size, [j.result() for j in jobs])
        self._progress("synthesis")
        return w

    def _g2(self, wf: Future) -> G2Point:
        """On a b_g2 pool thread: the host G2 MSM of a circuit, once its witness is there."""
        w = wf.result()
        assert self.g2_msm is not None
        lane = f"thread:b_g2-pool-{_slot(threading.current_thread().name)}"
        with self.stats.phase("b_g2", "host", circuit=w.circuit, batch=0, device=-1, lane=lane, parent=self.ctx,
                              kind="host", parts=self.g2_msm.parts_for(len(_host(w.z_limbs)))):
            return self.g2_msm.multiexp(G2Point, self.pk.b_g2, _host(w.z_limbs))

    def _publish(self, w: Witness) -> None:
        """A device made circuit w's witness: hand it to whoever waits for it (a host b_g2)."""
        self.witnesses[w.circuit].set_result(w)
        self._progress("synthesis")

    def _worker(self, d: int) -> None:
        """Device d's worker thread: its circuits d*B .. d*B+B-1. Errors are kept for the caller's thread."""
        o, backend = self.o, self.backend
        mine = list(range(d * o.batch, (d + 1) * o.batch))
        try:
            lane = backend.lanes(d)[0]
            b_g2 = self.b_g2 or None
            if self.stream_flow:
                assert self.stream_plans is not None
                done_proofs = stream_work(o, backend, lane, self.loaders[d], self.pk,
                                          [self.stream_plans[i] for i in mine], self._publish, b_g2, self.stats,
                                          self.ctx, _assemble, queued=o.device_flow == "stream",
                                          switches=self._flow_switches(d))
            else:
                assert self.bases is not None
                if self.dev_synth:
                    assert self.plans is not None
                    src = [self.plans[i].result() for i in mine]
                else:
                    src = [self.witnesses[i].result() for i in mine]
                done_proofs = _device_work(o, backend, lane, self.bases[d], self.pk, src, self._publish, b_g2,
                                           self.stats, self.ctx)
            for i, pr in zip(mine, done_proofs, strict=True):
                self.results[i] = pr
                self._progress("proof")
        except BaseException as exc:  # noqa: BLE001 (re-raised on the caller's thread by _run_workers)
            self.errors.append(exc)
            for i in mine:  # release b_g2 threads waiting for a witness
                if self.dev_synth and not self.witnesses[i].done():
                    self.witnesses[i].set_exception(exc)

    def _run_workers(self) -> None:
        for d in range(self.ndev):
            t = threading.Thread(target=self._worker, args=(d,), name=f"cpu-worker-{d}")
            t.start()
            self.threads.append(t)
        for t in self.threads:
            t.join()
        if self.errors:
            raise self.errors[0]

    def _close(self, cancel: bool) -> None:
        """Release the batch's pools and threads. ``cancel``: the caller's thread was interrupted (or failed), so
        stop the work first (see the class doc) instead of waiting for it."""
        if cancel:
            self.stats.cancel()
            for pool in (self.synth_pool, self.g2_pool):
                if pool is not None:
                    pool.shutdown(wait=False, cancel_futures=True)  # queued circuits never start
            if self.procs is not None:
                stop(self.procs, interrupted=True)  # running syntheses fail (BrokenProcessPool): their waiters end
        for t in self.threads:  # each worker ends at its next phase or when what it waits for fails
            t.join()
        for ld in self.loaders:  # no upload may still run when the backend closes
            ld.join()
        if self.synth_pool is not None:
            self.synth_pool.shutdown(wait=True, cancel_futures=True)
        if self.procs is not None:
            stop(self.procs, interrupted=cancel)
        if self.g2_pool is not None:
            self.g2_pool.shutdown(wait=True, cancel_futures=True)
        if self.g2_msm is not None:
            self.g2_msm.close()


def _synthesis_processes(n: int) -> ProcessPoolExecutor:
    """``n`` synthesis processes, all started now (before this batch's threads exist).

    Synthesis is pure-Python work, so threads would serialise on the GIL; the children only run
    ``synthesize_part`` (no tracer calls, no arkworks), and the host thread that waits for each child records its
    ``synthesis`` span. ``processes.fork_pool``: they leave Ctrl-C to this process.
    """
    return fork_pool(n)


def _slot(thread_name: str) -> str:
    return thread_name.rsplit("_", 1)[-1]
