"""``run_prove``: the batched Groth16 proving pipeline, every phase traced.

Structure of one run (phase names from ARCHITECTURE.md; all under one ``prove`` root):

* ``synthesis`` per circuit on a host pool (lanes ``thread:synth-N``, device -1): each synth thread hands
  its circuit to the worker processes (``ProveOptions.synthesis_workers``, default one per CPU; 1 = in-thread)
  and the span covers their run, results included. With more processes than circuits, each circuit is cut
  into ``parts`` (span attribute; ``workers // circuits`` contiguous challenge ranges, ``witness.synthesize_part``)
  run in parallel and merged, identical to a whole synthesis.
* one worker thread per backend device, proving its B circuits together: ``pin`` (B1) → ``h2d`` →
  ``ntt`` {``intt_abc``, ``coset_ntt``, ``h_eval``, ``intt_h``} on all 3B vectors at once → per circuit
  ``msm_h`` → ``batch_add`` (points whose scalar is 1, for A, B_G1 and L) → ``msm_l``, ``msm_a``,
  ``msm_b_g1`` (0/1 scalars removed; D4 plans) → ``sync`` (wait for that circuit's ``b_g2``) →
  ``assemble``; then ``unpin``.
* ``b_g2`` (G2 MSM) on a CPU pool started as soon as a circuit is synthesized, overlapping the device
  work: A4 on = one pool thread per CPU (circuits in parallel; arkworks releases the GIL), A4 off = one
  thread (circuits one after another). Lanes ``thread:b_g2-pool-N``. Each G2 MSM is itself cut into
  parts on a shared pool of one thread per CPU (``HostMsm``; span attribute ``parts``), since one
  arkworks multiexp uses one core.

With synthesis on the device (``ProveOptions.synthesis``), the witness of each circuit is made on its device
from a plan (``witness_plan.make_plan``): the plans are made in a fork pool of processes started before the keys
load, and each device's worker runs ``device_flow.stream_work`` (``device_flow="stream"``: witnesses on a second
stream, each circuit proven alone, its tail split on the device, the keys loaded by one thread per device inside
``prove`` in the order the first circuit needs them; every MSM's result stays on the device until one copy back per
circuit, so the worker never waits inside a circuit), ``device_flow="stream-sync"`` (the same with a host point
back after every MSM: the stream flow before, kept for A/B) or ``_device_work`` over the whole batch
(``device_flow="batch"``, the earlier flow, kept for A/B).

Parent contexts are handed to every thread, so nesting in the trace is exact. Threads: the caller's
thread runs setup, synthesis scheduling, verification and file writing.
"""

from __future__ import annotations

import functools
import secrets
import threading
import time
from collections import defaultdict
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G2Point

import gputrace
from gputrace.atomic_write import write_atomic

from .backends import make_backend
from .backends.base import LaneInfo, ProverBackend
from .circuit import CircuitShape, shape_for_constraints, validate_shape
from .device_flow import LOAD_ORDER, FlowSwitches, LoadingBases, quotient_h, stream_work
from .encoding import g2_to_affine_limbs
from .field import R, limbs_to_ints, to_scalar
from .fixed_base import PointRows
from .host_msm import HostMsm, cpu_threads
from .keygen.cache import get_keys
from .keygen.keys import load_vk
from .keygen.setup import ProvingKey
from .msm_plan import plan_msm
from .options import ALL_OPT_NAMES, ProveOptions, ProveResult, check_counts
from .processes import fork_pool, stop
from .verify import Proof, verify, write_proof
from .witness import Witness, merge_parts, split_challenges, synthesize_part, synthesize_witness
from .witness_plan import make_plan


class RunCancelled(Exception):
    """Raised in a worker thread at its next phase once the run is cancelled (the caller was interrupted)."""


class _Stats:
    """Thread-safe per-(phase, device-label) seconds, measured on the same intervals as the spans. Every phase
    of a run starts here, so it is also where the run's threads stop once ``cancel`` was called: a phase that
    starts after it raises ``RunCancelled`` (phases already running finish)."""

    def __init__(self) -> None:
        self.sec: dict[tuple[str, str], float] = defaultdict(float)
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @contextmanager
    def phase(self, name: str, label: str, **kw):
        if self._cancelled.is_set():
            raise RunCancelled(f"run cancelled before its {name} phase")
        t0 = time.perf_counter()
        try:
            with gputrace.phase(name, **kw) as p:
                yield p
        finally:
            dt = time.perf_counter() - t0
            with self._lock:
                self.sec[(name, label)] += dt


def resolve_shape(o: ProveOptions) -> CircuitShape:
    if o.challenges is not None or o.depth is not None:
        if o.challenges is None or o.depth is None:
            raise ValueError("--challenges and --depth go together")
        return validate_shape(o.challenges, o.depth)
    if o.constraints is None:
        raise ValueError("give --constraints or --challenges with --depth")
    return shape_for_constraints(o.constraints)


def _resolved(mode: str, backend: str, supported: bool | None) -> str:
    """Where ``synthesis``/``b_g2`` runs (``host``/``device``); ``auto`` when the backend is not known yet."""
    if mode != "auto":
        return mode
    if supported is not None:
        return "device" if supported else "host"
    return {"cpu": "host", "cuda": "device"}.get(backend, "auto")


def config_attrs(o: ProveOptions, shape: CircuitShape, backend: str, obj: ProverBackend | None = None) -> dict:
    cfg: dict[str, object] = {name: (name in o.opts) for name in ALL_OPT_NAMES}
    obj = obj if obj is not None else o.backend_object
    cfg.update(backend=backend, batch=o.batch, devices=o.devices if o.backend_object is None else
               o.backend_object.device_count(), constraints=shape.constraints,
               challenges=shape.challenges, depth=shape.depth,
               synthesis=_resolved(o.synthesis, backend, None if obj is None else obj.supports_device_witness),
               b_g2=_resolved(o.b_g2, backend, None if obj is None else obj.supports_g2), device_flow=o.device_flow)
    return cfg


def config_for(options: ProveOptions) -> dict:
    """The ``gputrace.config.*`` attributes a run with ``options`` records, for callers that call
    ``gputrace.configure(config=...)`` themselves (``configure_tracer=False``). ``backend`` is the
    requested one (``auto`` is not resolved here; ``ProveResult.config`` has the one used)."""
    return config_attrs(options, resolve_shape(options), options.backend)


def _where(o: ProveOptions, what: str, supported: bool, backend: ProverBackend) -> bool:
    """True when ``what`` (``synthesis`` or ``b_g2``) runs on the device. ValueError for a bad choice."""
    mode = getattr(o, what)
    if mode not in ("auto", "host", "device"):
        raise ValueError(f"{what} must be 'auto', 'host' or 'device', got {mode!r}")
    if mode == "device" and not supported:
        raise ValueError(f"{what}='device': the {backend.name} backend cannot run it on a device")
    return mode != "host" and supported


def run_prove(options: ProveOptions) -> ProveResult:
    """Prove ``batch × devices`` circuits; write proofs and ``vk.json`` to ``options.out_dir``.

    Raises ValueError for bad options, ``BackendUnavailable`` for ``--backend cuda`` without a GPU,
    ``UnsatisfiedConstraint`` if a witness is wrong, key errors from ``keys``.
    """
    o = options
    check_counts(o.batch, o.devices)  # the --devices bound of each backend: make_backend
    if o.synthesis_workers is not None and o.synthesis_workers < 1:
        raise ValueError(f"--synthesis-workers must be >= 1 (got {o.synthesis_workers})")
    unknown = set(o.opts) - set(ALL_OPT_NAMES)
    if unknown:
        raise ValueError(f"unknown optimisation switch {sorted(unknown)[0]!r}")
    shape = resolve_shape(o)
    if o.backend_object is not None:
        backend, notice = o.backend_object, None
    else:
        backend, notice = make_backend(o.backend, o.devices)
    out_dir = Path(o.out_dir)
    key_dir = Path(o.key_dir) if o.key_dir else out_dir / "keys"
    cfg = config_attrs(o, shape, backend.name, backend)
    try:
        dev_synth = _where(o, "synthesis", backend.supports_device_witness, backend)  # ValueError for a bad choice
        _where(o, "b_g2", backend.supports_g2, backend)
        if o.device_flow not in ("stream", "stream-sync", "batch"):
            raise ValueError(f"device_flow must be 'stream', 'stream-sync' or 'batch', got {o.device_flow!r}")
        out_dir.mkdir(parents=True, exist_ok=True)
        if o.configure_tracer:
            gputrace.configure(trace_file=str(o.trace) if o.trace else None, otlp=o.otlp, config=cfg)
    except BaseException:  # an unwritable output directory or trace file: still release the devices
        backend.close()
        raise
    stats = _Stats()
    plan_pool = None
    failed = False
    try:
        plans = None
        if dev_synth and o.device_flow in ("stream", "stream-sync"):  # plans need only shape and seed: made now
            plan_pool, plans = _start_plans(shape, o.seed, o.batch, backend.device_count())
        t0 = time.perf_counter()
        with stats.phase("setup", "host", kind="host", constraints=shape.constraints):
            keyset = get_keys(shape, key_dir, o.key_seed, keygen=o.keygen)
        pk = keyset.pk
        vk, _ = load_vk(keyset.vk_path)
        setup_s = time.perf_counter() - t0
        total = o.batch * backend.device_count()
        t_start = time.perf_counter()
        proofs, publics = _prove_batch(o, shape, backend, pk, stats, total, plans, pk_file=keyset.directory / "pk.npz")
        wall = time.perf_counter() - t_start
        paths, verified = [], []
        write_atomic(out_dir / "vk.json", keyset.vk_path.read_bytes())
        for i in range(total):
            p = out_dir / f"proof-{i}.json"
            write_proof(p, proofs[i], publics[i], circuit=i)
            paths.append(p)
            if o.verify:
                with stats.phase("verify", "host", circuit=i, kind="host"):
                    verified.append(verify(vk, proofs[i], publics[i]))
    except BaseException:  # Ctrl-C or an error: the plan workers are ended, not waited for
        failed = True
        raise
    finally:
        if plan_pool is not None:
            stop(plan_pool, interrupted=failed)
        backend.close()
        if o.configure_tracer:
            gputrace.shutdown()
    return ProveResult(
        proof_paths=paths, vk_path=out_dir / "vk.json", verified=verified, phase_seconds=dict(stats.sec),
        wall_s=wall, setup_s=setup_s, backend=backend.name, constraints=shape.constraints,
        challenges=shape.challenges, depth=shape.depth, notice=notice, config=cfg, key_cached=keyset.cached,
    )


def _start_plans(shape: CircuitShape, seed: int, batch: int, ndev: int) -> tuple[ProcessPoolExecutor, list[Future]]:
    """Witness plans of all ``batch * ndev`` circuits on a fork pool of processes (plans are pure Python: in
    threads they would hold the GIL the device workers launch with), submitted in the order the devices take
    their circuits (every device's first circuit first). Returns the pool (the caller shuts it down) and one
    future per circuit (``processes.fork_pool``: its workers leave Ctrl-C to this process)."""
    total = batch * ndev
    # At most 8 processes: a plan is ~15-30 ms and a device proves one circuit in ~0.3 s, so 8 keep ahead of any
    # number of devices after the first circuits, and the forks (before the keys load) stay cheap.
    pool = fork_pool(max(1, min(total, cpu_threads(), 8)))
    futures: list = [None] * total
    for j in range(batch):
        for d in range(ndev):
            futures[d * batch + j] = pool.submit(make_plan, shape, seed, d * batch + j)
    return pool, futures


def _prove_batch(o: ProveOptions, shape: CircuitShape, backend: ProverBackend, pk: ProvingKey,
                 stats: _Stats, total: int, stream_plans: list[Future] | None = None, pk_file: Path | None = None
                 ) -> tuple[list[Proof], list[list[int]]]:
    """The batch: ``stream_plans`` (plan futures by circuit) selects the stream flow (``device_flow.py``).
    ``pk_file``: the key's ``pk.npz``, which the ``reload`` switch reads again for every circuit."""
    return _Batch(o, shape, backend, pk, stats, total, stream_plans, pk_file).run()


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


def _assemble(pk: ProvingKey, sum_a, sum_b1, sum_l, sum_h, sum_b2) -> Proof:
    r = secrets.randbelow(R - 1) + 1  # fresh blinding per proof (zero knowledge)
    s = secrets.randbelow(R - 1) + 1
    rs, ss = to_scalar(r), to_scalar(s)
    a = pk.alpha_g1 + sum_a + pk.delta_g1 * rs
    b2 = pk.beta_g2 + sum_b2 + pk.delta_g2 * ss
    b1 = pk.beta_g1 + sum_b1 + pk.delta_g1 * ss
    c = sum_l + sum_h + a * ss + b1 * rs - pk.delta_g1 * to_scalar(r * s)
    return Proof(a=a, b=b2, c=c)
