"""A training loop as ``gputrace record`` (CUPTI) sees it, with or without its warm-up, deterministic by seed.

One process (``python train.py``: the root span on ``thread:MainThread``). With ``warmup``: 2 s of start-up
(interpreter, imports: no span, no GPU work), the model's weights copied to the GPU (a pinned copy, the first
GPU work), 1.5 s of module loading (host time in no span, the GPU idle), then ``warmup_steps`` slow first steps
(the first runs ``autotune_kernels`` extra kernels, as cuDNN's autotuner does). Then ``steps`` steady steps,
each a ``train_step`` range (``step_name``; ``ProfilerStep#`` numbers them as torch.profiler does) with
``data`` (host work, the GPU idle), ``h2d`` (a pageable copy), ``forward`` and ``backward`` (a few long
kernels), ``optimizer`` (many tiny kernels with launch gaps: launch-bound) and ``sync`` (a stream sync the
host blocks in). Step ``slow_step`` (of the steady ones) loads its batch ``slow_data_ms`` longer.

Without ``warmup`` the trace is the same steady steps with the same times, the root starting at the first
steady step: what a recording started at the steady state holds. ``ranges=False`` leaves only the root and
the GPU activity (a program without ranges: steps only from the repeating kernel sequence).

``train_loop(...) -> (resource, phases, records)`` for ``activity_records.activity_timeline``;
``train_loop_timeline(...)`` the Timeline.
"""

from __future__ import annotations

import random

from gputrace.testing.activity_records import activity_timeline

T0_NS = 1_767_225_600_000_000_000
MS = 1_000_000


class _Loop:
    def __init__(self) -> None:
        self.phases: list[dict] = []
        self.recs: list[dict] = []
        self.sid = 10
        self.corr = 1

    def phase(self, name: str, s: int, e: int, parent: int | None) -> int:
        self.sid += 1
        self.phases.append({"span_id": self.sid, "parent_span_id": parent, "name": name, "start_ns": s, "end_ns": e,
                            "attributes": {"gputrace.lane": "thread:MainThread"}})
        return self.sid

    def launch(self, t: int, gpu_free: int, name: str, dur: int, parent: int) -> tuple[int, int]:
        """A kernel launched at host time ``t``; returns (host time after the launch, GPU free time)."""
        self.recs.append({"kind": "RUNTIME", "start": t, "end": t + 4_000, "name": "cudaLaunchKernel",
                          "correlation_id": self.corr})
        ks = max(t + 6_000, gpu_free)
        self.recs.append({"kind": "KERNEL", "start": ks, "end": ks + dur, "device_id": 0, "stream_id": 7,
                          "correlation_id": self.corr, "name": name, "phase": parent})
        self.corr += 1
        return t + 5_000, ks + dur

    def copy(self, t: int, gpu_free: int, nbytes: int, gbps: float, pinned: bool, parent: int) -> tuple[int, int]:
        self.recs.append({"kind": "RUNTIME", "start": t, "end": t + 5_000, "name": "cudaMemcpyAsync",
                          "correlation_id": self.corr})
        cs = max(t + 8_000, gpu_free)
        ce = cs + int(nbytes / gbps)
        self.recs.append({"kind": "MEMCPY", "start": cs, "end": ce, "device_id": 0, "stream_id": 7,
                          "correlation_id": self.corr, "copy_kind": "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD",
                          "src_kind": "CUPTI_ACTIVITY_MEMORY_KIND_" + ("PINNED" if pinned else "PAGEABLE"),
                          "dst_kind": "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "bytes": nbytes, "phase": parent})
        self.corr += 1
        return (ce + 2_000 if not pinned else t + 10_000), ce

    def sync(self, t: int, gpu_free: int, parent: int) -> int:
        end = max(t + 20_000, gpu_free + 10_000)
        self.recs.append({"kind": "RUNTIME", "start": t, "end": end, "name": "cudaStreamSynchronize",
                          "correlation_id": self.corr})
        self.recs.append({"kind": "SYNCHRONIZATION", "start": t, "end": end, "device_id": 0, "stream_id": 7,
                          "type": "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE",
                          "correlation_id": self.corr, "thread": "MainThread", "phase": parent})
        self.corr += 1
        return end


def _step(lp: _Loop, rnd: random.Random, t: int, root: int, name: str, ranges: bool, *, extra_host: int = 0,
          autotune: int = 0, data_ms: float = 6.0) -> int:
    """One training step from host time ``t``; returns the host time at its end."""
    j = rnd.uniform
    s0 = t
    step = lp.phase(name, t, t, root if ranges else None) if ranges else root
    ix = len(lp.phases) - 1

    def part(pname: str):
        return lp.phase(pname, t, t, step) if ranges else root

    p = part("data")
    t += int(data_ms * MS * j(0.97, 1.03))
    if ranges:
        lp.phases[-1]["end_ns"] = t
    gpu = t
    p = part("h2d")
    t, gpu = lp.copy(t, gpu, 8 << 20, 4.0, False, p)
    if ranges:
        lp.phases[-1]["end_ns"] = t
    p = part("forward")
    for k in range(autotune):  # cuDNN's autotuner tries algorithms: long kernels, the host waiting for each
        t, gpu = lp.launch(t, gpu, "void cudnn::conv_algo_probe<(int)4>(float*)", int(2 * MS * j(0.9, 1.1)), p)
        t = gpu + 50_000 + 0 * k
    t += extra_host
    for k in range(4):
        t, gpu = lp.launch(t + 20_000, gpu, f"void fwd_gemm_{k}<float>(float*)", int(0.8 * MS * j(0.95, 1.05)), p)
    if ranges:
        lp.phases[-1]["end_ns"] = t
    p = part("backward")
    for k in range(6):
        t, gpu = lp.launch(t + 20_000, gpu, f"void bwd_gemm_{k}<float>(float*)", int(0.8 * MS * j(0.95, 1.05)), p)
    if ranges:
        lp.phases[-1]["end_ns"] = t
    t = max(t, gpu - 2 * MS)  # the host is ahead of the GPU by at most 2 ms (a bounded queue)
    p = part("optimizer")
    for _ in range(30):
        t, gpu = lp.launch(t + int(40_000 * j(0.9, 1.1)), gpu, "void adam_update<float>(float*)", 10_000, p)
    if ranges:
        lp.phases[-1]["end_ns"] = t
    p = part("sync")
    t = lp.sync(t, gpu, p)
    if ranges:
        lp.phases[-1]["end_ns"] = t
        lp.phases[ix]["end_ns"] = t
    del s0
    return t + 30_000


def train_loop(*, steps: int = 20, warmup: bool = True, warmup_steps: int = 2, autotune_kernels: int = 60,
               slow_step: int | None = 12, slow_data_ms: float = 25.0, step_name: str = "train_step",
               ranges: bool = True, seed: int = 0):
    """(resource, phase span dicts, CUPTI-like records) of the loop (see the module docstring)."""
    rnd = random.Random(seed)
    lp = _Loop()
    res = {"service.name": "train", "host.name": "node", "process.pid": 4242, "gputrace.run_id": f"train-{seed}"}
    root = lp.phase("python train.py", T0_NS, T0_NS, None)
    t = T0_NS + 2_000 * MS  # start-up: interpreter, imports
    t, gpu = lp.copy(t, t, 256 << 20, 25.0, True, root)  # model.to(device): the first GPU work
    t = gpu + 1_500 * MS  # module loading, cuBLAS/cuDNN handles: host time in no range, the GPU idle

    def name(i: int) -> str:
        return f"{step_name}{i}" if step_name.endswith("#") else step_name

    for i in range(warmup_steps):
        t = _step(lp, rnd, t, root, name(i), ranges, autotune=autotune_kernels if i == 0 else 0,
                  extra_host=(0 if i == 0 else 8 * MS))
    steady_at = t
    for i in range(steps):
        t = _step(lp, rnd, t, root, name(warmup_steps + i), ranges,
                  data_ms=6.0 + (slow_data_ms if i == slow_step else 0.0))
    lp.phases[0]["end_ns"] = t + 1 * MS
    if not warmup:
        lp.phases = [p for p in lp.phases if p["start_ns"] >= steady_at or p["span_id"] == root]
        lp.phases[0]["start_ns"] = steady_at
        keep = {r["correlation_id"] for r in lp.recs if r["kind"] != "RUNTIME" and r["start"] >= steady_at}
        lp.recs = [r for r in lp.recs if r["correlation_id"] in keep]
    return res, lp.phases, lp.recs


def train_loop_timeline(**kw):
    """``train_loop(**kw)`` as a Timeline, through the OTLP reader."""
    res, phases, recs = train_loop(**kw)
    return activity_timeline(res, phases, recs)
