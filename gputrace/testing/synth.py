"""Build small Timelines from plain span dicts, and synthetic prover-shaped runs.

For tests, examples and benchmarks of the analysis: the statistics must be checkable
without the prover or the recorder. `make_timeline` is exact (no randomness);
`synthetic_run` draws a pipeline-shaped run with multiplicative noise and optional
injected slowdowns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from gputrace.phases import phase_kind
from gputrace.timeline.model import KIND_CODES, Lane, Timeline


def make_timeline(spans: Iterable[Mapping], resource: Mapping | None = None, trace_id: str = "t0",
                  resources: Sequence[Mapping] | None = None) -> Timeline:
    """A Timeline from span dicts (one trace; one resource, or ``resources`` and a ``resource`` index per span).

    Keys: ``name`` (phase), ``start``, ``end`` (ns; required); optional ``id`` (any hashable,
    default the list position), ``parent`` (an ``id``), ``device`` (default -1), ``lane``
    (default ``stream:0`` for gpu-kind spans on a device, else ``thread:main``), ``kind``
    (default from the phase vocabulary), ``gpu_start``/``gpu_end``, ``circuit``, ``batch``,
    ``bytes``, ``host`` (default ``h``), ``pid`` (default 1), ``resource`` (index into ``resources``,
    default 0), ``attrs`` (dict). Raises ValueError naming the span
    on end < start or an unknown parent id.
    """
    spans = list(spans)
    n = len(spans)
    ids = {}
    for i, sp in enumerate(spans):
        ids[sp.get("id", i)] = i + 1  # span_id 0 means "none" in the model
    lanes: list[Lane] = []
    lane_ix: dict[Lane, int] = {}
    phases: list[str] = []
    ph_ix: dict[str, int] = {}
    cols = {
        k: np.full(n, -1, np.int64)
        for k in ("start", "end", "gpu_start", "gpu_end", "device", "circuit", "batch", "nbytes")
    }
    phase = np.zeros(n, np.int32)
    lane = np.zeros(n, np.int32)
    kind = np.zeros(n, np.int8)
    span_id = np.zeros(n, np.uint64)
    parent_id = np.zeros(n, np.uint64)
    attrs = {}
    for i, sp in enumerate(spans):
        name = sp["name"]
        s, e = int(sp["start"]), int(sp["end"])
        if e < s:
            raise ValueError(f"span {i} ({name}): end {e} < start {s}")
        k = sp.get("kind", phase_kind(name))
        dev = int(sp.get("device", -1))
        ln = sp.get("lane") or ("stream:0" if (k == "gpu" and dev >= 0) else "thread:main")
        # as the reader does: a lane is (host, pid, device, name)
        lane_obj = Lane(sp.get("host", "h"), int(sp.get("pid", 1)), dev, ln)
        lane[i] = lane_ix.setdefault(lane_obj, len(lane_ix))
        if lane[i] == len(lanes):
            lanes.append(lane_obj)
        phase[i] = ph_ix.setdefault(name, len(ph_ix))
        if phase[i] == len(phases):
            phases.append(name)
        kind[i] = KIND_CODES[k]
        cols["start"][i], cols["end"][i], cols["device"][i] = s, e, dev
        for key, col in (
            ("gpu_start", "gpu_start"),
            ("gpu_end", "gpu_end"),
            ("circuit", "circuit"),
            ("batch", "batch"),
            ("bytes", "nbytes"),
        ):
            if sp.get(key) is not None:
                cols[col][i] = int(sp[key])
        span_id[i] = ids[sp.get("id", i)]
        if sp.get("parent") is not None:
            if sp["parent"] not in ids:
                raise ValueError(f"span {i} ({name}): unknown parent id {sp['parent']!r}")
            parent_id[i] = ids[sp["parent"]]
        if sp.get("attrs"):
            attrs[i] = dict(sp["attrs"])
    full: dict[str, np.ndarray] = dict(cols)
    full.update(phase=phase, lane=lane, kind=kind, span_id=span_id, parent_span_id=parent_id)
    full["status"] = np.zeros(n, np.int8)  # STATUS_UNSET
    full["resource"] = np.array([int(sp.get("resource", 0)) for sp in spans], np.int32)
    full["trace"] = np.zeros(n, np.int32)
    one = dict(resource) if resource is not None else {"service.name": "synthetic", "gputrace.run_id": trace_id}
    res_list = [dict(r) for r in resources] if resources is not None else [one]
    return Timeline.from_unsorted(full, phases, lanes, res_list, [trace_id], attrs)


#: Default pipeline for `synthetic_run`: (path, mean seconds, kind). Children follow parents.
DEFAULT_PIPELINE: tuple[tuple[str, float, str], ...] = (
    ("synthesis", 5.0, "host"),
    ("h2d", 0.6, "gpu"),
    ("ntt", 1.2, "gpu"),
    ("msm_h", 1.5, "gpu"),
    ("msm_l", 1.0, "gpu"),
    ("msm_a", 0.8, "gpu"),
    ("msm_b_g1", 0.7, "gpu"),
    ("b_g2", 0.9, "host"),
    ("assemble", 0.1, "host"),
)


def synthetic_run(
    seed: int,
    *,
    circuits: int = 2,
    devices: int = 1,
    noise: float = 0.03,
    slow: Mapping[str, float] | None = None,
    pipeline: tuple[tuple[str, float, str], ...] = DEFAULT_PIPELINE,
    resource: Mapping | None = None,
    scale_ns: float = 1e6,
) -> Timeline:
    """One synthetic run: per circuit a ``prove`` root whose children run back to back.

    Each phase duration is ``mean * scale_ns * (1 + slow.get(phase, 0)) * lognormal(noise)``
    (the default ``scale_ns`` makes "seconds" in the pipeline table milliseconds, so runs
    are small). GPU phases get device times equal to their host times on device
    ``circuit % devices``. Deterministic for a given ``seed``.
    """
    rng = np.random.default_rng(seed)
    slow = dict(slow or {})
    spans: list[dict] = []
    t = 1_000_000_000_000
    for ci in range(circuits):
        dev = ci % devices
        root = f"p{ci}"
        t0 = t
        kids = []
        for name, mean, kind in pipeline:
            d = int(mean * scale_ns * (1.0 + slow.get(name, 0.0)) * rng.lognormal(0.0, noise))
            sp = {"name": name, "start": t, "end": t + d, "parent": root, "circuit": ci, "batch": 0, "kind": kind}
            if kind == "gpu":
                sp.update(device=dev, lane=f"stream:{dev}", gpu_start=t, gpu_end=t + d)
            kids.append(sp)
            t += d
        spans.append({"id": root, "name": "prove", "start": t0, "end": t, "circuit": ci, "batch": 0, "kind": "host"})
        spans.extend(kids)
    res = dict(resource) if resource is not None else {"service.name": "synthetic", "gputrace.run_id": f"run-{seed}"}
    return make_timeline(spans, resource=res, trace_id=f"{(seed & 0xFFFFFFFFFFFFFFFF) + 1:032x}")


def switch_run(
    switches,
    seed: int,
    *,
    effects: Mapping[str, Mapping[str, float]] | None = None,
    extra: Mapping[str, tuple[str, float]] | None = None,
    noise: float = 0.03,
    circuits: int = 2,
    devices: int = 1,
    pipeline: tuple[tuple[str, float, str], ...] = DEFAULT_PIPELINE,
) -> Timeline:
    """A `synthetic_run` whose phase times depend on the switches that are on.

    ``effects``: term -> {phase: relative change}; a term is a switch (``"b1"``) or a pair
    (``"b1*d4"``, active when both are on); active terms multiply (1 + change). ``extra``:
    switch -> (phase, mean) inserted as a host child after ``synthesis`` when that switch is on
    (e.g. ``{"b1": ("pin", 0.8)}``). The resource records ``gputrace.config.<switch>``.
    """
    on = frozenset(switches)
    slow: dict[str, float] = {}
    for term, changes in (effects or {}).items():
        parts = term.split("*")
        if all(p in on for p in parts):
            for ph, rel in changes.items():
                slow[ph] = (1.0 + slow.get(ph, 0.0)) * (1.0 + rel) - 1.0
    pipe = list(pipeline)
    for sw, (ph, mean) in (extra or {}).items():
        if sw in on:
            kind = "pin" if ph in ("pin", "unpin") else "host"
            pipe.insert(1, (ph, mean, kind))
    known = sorted({p for t in (effects or {}) for p in t.split("*")} | set(extra or {}))
    res: dict[str, object] = {"service.name": "synthetic", "gputrace.run_id": f"run-{seed}"}
    res.update({f"gputrace.config.{s}": s in on for s in known})
    return synthetic_run(
        seed, circuits=circuits, devices=devices, noise=noise, slow=slow, pipeline=tuple(pipe), resource=res
    )


def sample_span(samples: Sequence[tuple[int, Sequence[tuple[str, int, str, int]]]], *, pid: int = 1,
                host: str = "h", hz: float = 100.0, thread: str = "MainThread", resource: int = 0) -> dict:
    """One ``gputrace.samples`` batch span (a span dict for ``make_timeline``) holding ``samples``: each
    ``(t_ns, stack)``, the stack's frames ``(file, line, function, kind)`` innermost first (kind:
    ``activity.FILE_USER`` ...), all on one thread. Encoded as the recorder encodes a batch
    (``gputrace.trace.stack_sampler.batch_attributes``)."""
    from gputrace.trace.stack_sampler import SampleBatch, batch_attributes

    samples = sorted(samples, key=lambda s: s[0])
    files: dict[str, int] = {}
    frames: dict[tuple, int] = {}
    stacks: dict[tuple, int] = {}
    file_list: list[tuple[str, int]] = []
    frame_list: list[tuple[int, int, str]] = []
    stack_list: list[tuple[int, ...]] = []
    sids = []
    for _, stack in samples:
        ids = []
        for f, ln, fn, kind in stack:
            if f not in files:
                files[f] = len(file_list)
                file_list.append((f, kind))
            key = (files[f], ln, fn)
            if key not in frames:
                frames[key] = len(frame_list)
                frame_list.append(key)
            ids.append(frames[key])
        st = tuple(ids)
        if st not in stacks:
            stacks[st] = len(stack_list)
            stack_list.append(st)
        sids.append(stacks[st])
    b = SampleBatch(t_ns=[t for t, _ in samples], thread=[0] * len(samples), stack=sids, threads=[(7, thread)],
                    stacks=stack_list, frames=frame_list, files=file_list, hz=hz)
    t0 = samples[0][0] if samples else 0
    t1 = samples[-1][0] + 1 if samples else 1
    return {"name": "gputrace.samples", "start": t0, "end": t1, "lane": "thread:gputrace.samples", "pid": pid,
            "host": host, "kind": "host", "resource": resource, "attrs": batch_attributes(b)}


def kineto_pids_trace(n: int, base_ns: int | None = None) -> dict:
    """A Kineto (torch.profiler) JSON document with ``n`` processes: one ``aten::mm`` CPU op per pid (1000 + i)
    and one kernel each on pid 0's stream 7, all the host's processes sharing its kernels (the shape of a trace of
    many pids, for the scaling tests and ``benchmarks/bench_scaling.py``). ``base_ns``: ``baseTimeNanoseconds``."""
    ev = []
    for p in range(n):
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1000 + p, "tid": 1, "ts": p * 10.0,
                   "dur": 5.0, "args": {}})
        ev.append({"ph": "X", "cat": "kernel", "name": "void gemm<1>(float*)", "pid": 0, "tid": 7, "ts": p * 10.0 + 2,
                   "dur": 3.0, "args": {"device": 0, "stream": 7, "correlation": p + 1}})
    doc: dict = {"schemaVersion": 1, "traceEvents": ev}
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    return doc
