"""Prover-shaped runs with GPU activity (kernels, copies, memsets, syncs) of any size, deterministic by seed.

Per batch on ``thread:main``: a ``prove`` root; per GPU an ``h2d`` phase with one pinned and one pageable
host-to-device copy; then the GPU phases (``ntt``, ``msm_h``, ``msm_l``, ...) on ``stream:1`` with CUDA-event
brackets, each launching ``kernels_per_phase`` kernels with a host delay before each launch (the launch
gaps), a memset, and a stream synchronization on ``thread:main`` at the end of the batch. About one host
phase span per 20 device spans, so ``kernels=100_000`` is a 100k-kernel trace.

``activity_run(...) -> (resource, phases, records)`` feeds ``gputrace.testing.activity_records``;
``activity_run_timeline(...)`` and ``write_activity_run(path, ...)`` build the Timeline / OTLP JSON Lines.
"""

from __future__ import annotations

import io
import random

from gputrace.otlp.encode import encode_request
from gputrace.testing.activity_records import activity_spans

T0_NS = 1_767_225_600_000_000_000
_PHASES = ("ntt", "msm_h", "msm_l", "msm_a", "msm_b_g1")
_KERNELS = {"ntt": ("void ntt_radix<(int)8>(Fr*, unsigned int)", "void bit_reverse<Fr>(Fr*, int)"),
            "msm_h": ("void msm_bucket<(int)13>(G1*, Fr const*)", "void msm_reduce<G1>(G1*, int)")}
_DEFAULT_KERNELS = ("void msm_bucket<(int)13>(G1*, Fr const*)", "void msm_reduce<G1>(G1*, int)")


def activity_run(kernels: int = 2000, gpus: int = 1, kernels_per_phase: int = 20, seed: int = 0,
                 pin: bool = True, launch_gap_ns: int = 30_000, kernel_ns: int = 20_000,
                 kernel_scale: dict[str, float] | None = None):
    """(resource, phase span dicts, CUPTI-like records) of a run with about ``kernels`` kernels.
    ``kernel_scale``: short kernel name -> duration factor (e.g. ``{"msm_bucket": 1.3}``)."""
    from gputrace.activity import short_kernel_name

    scale = {
        n: (kernel_scale or {}).get(short_kernel_name(n), 1.0)
        for ns in (*_KERNELS.values(), _DEFAULT_KERNELS)
        for n in ns
    }
    rnd = random.Random(seed)
    res = {"service.name": "prover", "host.name": "gpu-node", "process.pid": 4242,
           "gputrace.run_id": f"activity-{seed}", "gputrace.config.b1": pin}
    run = _Run()
    per_batch = max(1, gpus * len(_PHASES) * kernels_per_phase)
    batches = max(1, -(-kernels // per_batch))
    done = 0
    for _ in range(batches):
        root_start = run.t
        root = run.sid + 1
        run.phase("prove", run.t, run.t, None, "thread:main")  # end fixed below
        root_ix = len(run.phases) - 1
        run.t += 200_000
        for dev in range(gpus):
            _h2d(run, dev, root)
        for name in _PHASES:
            for dev in range(gpus):
                if done >= kernels:
                    break
                done += _gpu_phase(run, name, dev, root, min(kernels_per_phase, kernels - done), rnd, scale,
                                   launch_gap_ns, kernel_ns)
        _stream_sync(run, gpus - 1, root)
        run.phases[root_ix].update(start_ns=root_start, end_ns=run.t)
        run.t += 300_000
    return res, run.phases, run.recs


class _Run:
    """What ``activity_run`` has built so far: the phase span dicts, the CUPTI-like records, the last span id
    given, the next correlation id and the host's current time (ns). One run, one thread."""

    def __init__(self) -> None:
        self.phases: list[dict] = []
        self.recs: list[dict] = []
        self.sid = 1
        self.corr = 1
        self.t = T0_NS

    def phase(self, name, s, e, parent, lane, dev=None, gpu=None) -> int:
        """Append a phase span (a new span id, returned) on ``lane``; with ``dev``, a GPU phase of that device;
        ``gpu``: its (start, end) GPU times."""
        self.sid += 1
        a = {"gputrace.lane": lane}
        if dev is not None:
            a["gputrace.device"] = dev
            a["gputrace.kind"] = "gpu"
        if gpu is not None:
            a["gputrace.gpu.start_ns"], a["gputrace.gpu.end_ns"] = gpu
        self.phases.append(
            {"span_id": self.sid, "parent_span_id": parent, "name": name, "start_ns": s, "end_ns": e, "attributes": a}
        )
        return self.sid


def _h2d(run: _Run, dev: int, root: int) -> None:
    """An ``h2d`` phase of GPU ``dev`` under ``root``: a pinned and a pageable host-to-device copy, each
    launched by a ``cudaMemcpyAsync``; advances the run's time past them."""
    s0 = run.t
    h2d = run.phase("h2d", s0, s0, root, "stream:1", dev, None)
    h2d_ix = len(run.phases) - 1
    for src, nb in (("PINNED", 64 << 20), ("PAGEABLE", 16 << 20)):
        t = run.t
        run.recs.append(
            {"kind": "RUNTIME", "start": t, "end": t + 5_000, "name": "cudaMemcpyAsync", "correlation_id": run.corr}
        )
        dur = int(nb / (25.0 if src == "PINNED" else 6.0))  # bytes / (GB/s) = ns
        run.recs.append({"kind": "MEMCPY", "start": t + 8_000, "end": t + 8_000 + dur, "device_id": dev,
                         "stream_id": 1, "correlation_id": run.corr, "copy_kind": "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD",
                         "src_kind": f"CUPTI_ACTIVITY_MEMORY_KIND_{src}",
                         "dst_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "bytes": nb, "phase": h2d})
        run.corr += 1
        run.t = t + 8_000 + dur + 2_000
    run.phases[h2d_ix].update(end_ns=run.t)
    run.phases[h2d_ix]["attributes"].update({"gputrace.gpu.start_ns": s0 + 8_000, "gputrace.gpu.end_ns": run.t})


def _gpu_phase(run: _Run, name: str, dev: int, root: int, n_kernels: int, rnd: random.Random,
               scale: dict[str, float], launch_gap_ns: int, kernel_ns: int) -> int:
    """A GPU phase ``name`` of GPU ``dev`` under ``root`` on ``stream:1``: a memset, then ``n_kernels``
    kernels, each after a random host delay (``rnd``, ``launch_gap_ns``) and its ``cudaLaunchKernel``,
    lasting a random multiple of ``kernel_ns`` times its ``scale``; advances the run's time past the
    phase. Returns ``n_kernels``."""
    t = run.t
    corr = run.corr
    recs = run.recs
    s0 = t
    ph = run.phase(name, s0, s0, root, "stream:1", dev, None)
    ph_ix = len(run.phases) - 1
    recs.append(
        {"kind": "RUNTIME", "start": t, "end": t + 3_000, "name": "cudaMemsetAsync", "correlation_id": corr}
    )
    recs.append({"kind": "MEMSET", "start": t + 4_000, "end": t + 6_000, "device_id": dev, "stream_id": 1,
                 "correlation_id": corr, "memory_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE",
                 "bytes": 1 << 20, "phase": ph})
    corr += 1
    gpu_free = t + 6_000
    names = _KERNELS.get(name, _DEFAULT_KERNELS)
    for k in range(n_kernels):
        t += int(launch_gap_ns * (0.5 + rnd.random()))  # host work before the launch
        recs.append({"kind": "RUNTIME", "start": t, "end": t + 4_000, "name": "cudaLaunchKernel",
                     "correlation_id": corr})
        ks = max(t + 6_000, gpu_free)
        ke = ks + int(kernel_ns * scale[names[k % len(names)]] * (0.5 + rnd.random()))
        recs.append({"kind": "KERNEL", "start": ks, "end": ke, "device_id": dev, "stream_id": 1,
                     "correlation_id": corr, "name": names[k % len(names)],
                     "grid_x": 1024, "grid_y": 1, "grid_z": 1, "block_x": 256,
                     "block_y": 1, "block_z": 1, "registers_per_thread": 64 + 8 * (k % 2),
                     "static_shared_memory": 0, "dynamic_shared_memory": 16384, "phase": ph})
        corr += 1
        gpu_free = ke
        t += 4_000
    t = max(t, gpu_free - 10_000)
    run.phases[ph_ix].update(end_ns=t)
    run.phases[ph_ix]["attributes"].update(
        {"gputrace.gpu.start_ns": s0 + 2_000, "gputrace.gpu.end_ns": gpu_free + 1_000}
    )
    run.t = max(t, gpu_free + 1_000)
    run.corr = corr
    return n_kernels


def _stream_sync(run: _Run, dev: int, root: int) -> None:
    """The host's ``cudaStreamSynchronize`` on GPU ``dev``'s stream at the end of a batch (its record under
    ``root``); advances the run's time past it."""
    t = run.t
    run.recs.append(
        {"kind": "RUNTIME", "start": t, "end": t + 50_000, "name": "cudaStreamSynchronize", "correlation_id": run.corr}
    )
    run.recs.append({"kind": "SYNCHRONIZATION", "start": t, "end": t + 50_000, "device_id": dev, "stream_id": 1,
                     "type": "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "correlation_id": run.corr,
                     "thread": "main", "phase": root})
    run.corr += 1
    run.t = t + 100_000


def _lines(res, phases, recs, trace_id, spans_per_line=2048):
    spans = [dict(p, trace_id=trace_id) for p in phases] + [dict(s, trace_id=trace_id) for s in activity_spans(recs)]
    for i in range(0, len(spans), spans_per_line):
        yield encode_request(res, spans[i:i + spans_per_line])


def write_activity_run(path, *, trace_id: str = "5eed" * 8, **kw) -> int:
    """Write ``activity_run(**kw)`` as OTLP JSON Lines; returns the span count."""
    res, phases, recs = activity_run(**kw)
    n = 0
    with open(path, "wb") as f:
        for line in _lines(res, phases, recs, trace_id):
            f.write(line + b"\n")
            n += 1
    return len(phases) + sum(1 for r in recs if r["kind"] != "RUNTIME")


def activity_run_timeline(*, trace_id: str = "5eed" * 8, **kw):
    """``activity_run(**kw)`` as a Timeline, through the OTLP reader."""
    from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader

    res, phases, recs = activity_run(**kw)
    buf = io.BytesIO()
    for line in _lines(res, phases, recs, trace_id):
        buf.write(line + b"\n")
    loader = TraceLoader()
    for n, line in enumerate(buf.getvalue().split(b"\n"), 1):
        loader.feed("<activity-run>", n, line)
    return loader.timeline()
