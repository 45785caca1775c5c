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
back after every MSM: the stream flow before, kept for A/B) or ``batch_flow._device_work`` over the whole
batch (``device_flow="batch"``, the earlier flow, kept for A/B).

Parent contexts are handed to every thread, so nesting in the trace is exact. Threads: the caller's
thread runs setup, synthesis scheduling, verification and file writing.

This module holds ``run_prove`` (options checked, the keys, the batch, proofs written and verified) and the
stream flows' plan pool (``_start_plans``). The rest of a run lives in: ``run_config`` (the shape, where
``synthesis`` and ``b_g2`` run, the config attributes), ``run_stats`` (the phase clock and ``RunCancelled``),
``batch_run`` (``_Batch``: one batch's threads and pools), ``batch_flow`` (the whole-batch device work),
``device_flow`` (the stream flows) and ``assemble`` (a proof from its MSM sums). ``RunCancelled``,
``resolve_shape``, ``config_attrs`` and ``config_for`` stay importable from here.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import gputrace
from gputrace.atomic_write import write_atomic

from .backends import make_backend
from .backends.base import ProverBackend
from .batch_run import _Batch
from .circuit import CircuitShape
from .host_msm import cpu_threads
from .keygen.cache import get_keys
from .keygen.keys import load_vk
from .keygen.setup import ProvingKey
from .options import ALL_OPT_NAMES, ProveOptions, ProveResult, check_counts
from .processes import fork_pool, stop
from .run_config import _where, config_attrs, config_for, resolve_shape
from .run_stats import RunCancelled, _Stats
from .verify import Proof, verify, write_proof
from .witness_plan import make_plan

__all__ = ["RunCancelled", "config_attrs", "config_for", "resolve_shape", "run_prove"]


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
