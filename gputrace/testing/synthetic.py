"""Synthetic prover-like traces, written as OTLP JSON Lines through ``gputrace.otlp.encode``.

The shape follows a batched multi-GPU Groth16 prover (see ARCHITECTURE.md): per host process,
each batch is one ``prove`` root on ``thread:main``; ``synthesis`` of every circuit runs on host
worker threads (``thread:synth-K``); then ``pin`` and per-GPU ``h2d``; per circuit, on stream
``stream:(c // gpus) % streams`` of GPU ``c % gpus``: ``ntt`` (children ``intt_abc``, ``coset_ntt``,
``h_eval``, ``intt_h``), ``msm_h``, ``batch_add``, ``msm_l``, ``msm_a``, ``msm_b_g1``, with
device times (``gputrace.gpu.start_ns``/``end_ns``); ``b_g2`` on a host thread; per-GPU ``d2h``;
a ``sync`` host wait on ``thread:main``; ``assemble`` per circuit; ``unpin``. GPUs sit idle
during synthesis (the gaps the analysis should find).

Deterministic by ``seed`` (``random.Random``; same output bytes for the same arguments and
version). ``phase_scale`` multiplies phase durations (e.g. ``{"msm_h": 1.3}``) and
``pin_overhead_ms`` adds host time to ``pin``/``unpin`` so A/B comparisons have something to find.

``write_synthetic`` streams to a file (``.gz`` names are gzip-compressed) and never holds the
whole trace; ``synthetic_timeline`` returns a ``Timeline`` via the real reader.
"""

from __future__ import annotations

import gzip
import io
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from gputrace.otlp.encode import encode_request

__all__ = ["SyntheticSpec", "SyntheticStats", "iter_synthetic", "write_synthetic", "synthetic_timeline"]

# Mean durations in milliseconds (before phase_scale and noise), per circuit or per batch.
_MS = {
    "synthesis": 40.0, "pin": 6.0, "h2d": 4.0,
    "intt_abc": 2.0, "coset_ntt": 2.4, "h_eval": 0.8, "intt_h": 1.6,
    "msm_h": 6.0, "batch_add": 1.5, "msm_l": 5.0, "msm_a": 4.0, "msm_b_g1": 3.5,
    "b_g2": 9.0, "d2h": 1.5, "assemble": 0.6, "unpin": 2.0,
}
_NTT_CHILDREN = ("intt_abc", "coset_ntt", "h_eval", "intt_h")
_MSMS = ("msm_h", "batch_add", "msm_l", "msm_a", "msm_b_g1")
T0_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: a fixed epoch so outputs are stable


@dataclass
class SyntheticSpec:
    """What to generate. ``target_spans`` (if set) stops generation after exactly that many spans."""

    hosts: int = 1
    gpus: int = 2
    streams: int = 2
    circuits: int = 4  # per batch
    batches: int = 3  # per host (ignored when target_spans is set: as many as needed)
    target_spans: int | None = None
    seed: int = 0
    noise: float = 0.05  # uniform +-5 % on every duration
    phase_scale: dict[str, float] = field(default_factory=dict)
    pin_overhead_ms: float = 0.0
    synth_threads: int = 4
    t0_ns: int = T0_NS
    service_name: str = "prover"
    config: dict[str, object] = field(default_factory=dict)  # -> gputrace.config.* resource attributes


@dataclass
class SyntheticStats:
    spans: int = 0
    lines: int = 0
    bytes: int = 0
    t0_ns: int = 0
    t1_ns: int = 0


def _resource(spec: SyntheticSpec, h: int) -> dict:
    r = {
        "service.name": spec.service_name,
        "host.name": f"host{h}",
        "process.pid": 1000 + h,
        "gputrace.run_id": f"synthetic-{spec.seed}",
        "gputrace.version": "synthetic",
    }
    for k, v in spec.config.items():
        r[f"gputrace.config.{k}"] = v
    for g in range(spec.gpus):
        r[f"gputrace.gpu.{g}.model"] = "NVIDIA H200"
        r[f"gputrace.gpu.{g}.uuid"] = f"GPU-{h:04x}{g:04x}-0000-0000-0000-{spec.seed:012x}"
        r[f"gputrace.gpu.{g}.driver"] = "580.95.05"
    return r


class _Host:
    """Generates one host's spans batch by batch (clock advances monotonically)."""

    def __init__(self, spec: SyntheticSpec, h: int, rnd: random.Random) -> None:
        self.spec, self.h, self.rnd = spec, h, rnd
        self.t = spec.t0_ns + h * 1_700_000  # hosts start a little apart
        self.next_id = 1 + (h << 40)
        self.batch = 0

    def _d(self, phase: str, extra_ms: float = 0.0) -> int:
        s = self.spec
        ms = _MS[phase] * s.phase_scale.get(phase, 1.0) + extra_ms
        return max(1000, int(ms * 1e6 * (1.0 + s.noise * (2.0 * self.rnd.random() - 1.0))))

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def batch_spans(self) -> list[dict]:
        s, rnd = self.spec, self.rnd
        b = self.batch
        self.batch += 1
        tid = rnd.getrandbits(128).to_bytes(16, "big")
        out: list[dict] = []

        def span(name, start, end, parent, lane, device=-1, circuit=None, nbytes=None, gpu=None, kind=None):
            sid = self._id()
            a: dict = {}
            if device >= 0:
                a["gputrace.device"] = device
            a["gputrace.lane"] = lane
            if circuit is not None:
                a["gputrace.circuit"] = circuit
            a["gputrace.batch"] = b
            if nbytes is not None:
                a["gputrace.bytes"] = nbytes
            if gpu is not None:
                a["gputrace.gpu.start_ns"], a["gputrace.gpu.end_ns"] = gpu
            if kind is not None:
                a["gputrace.kind"] = kind
            out.append(dict(trace_id=tid, span_id=sid, parent_span_id=parent, name=name,
                            start_ns=start, end_ns=end, attributes=a))
            return sid, out[-1]

        t = self.t
        root_id, root = span("prove", t, t, None, "thread:main")
        t += 20_000
        # synthesis: circuits spread over worker threads, in parallel
        free = [t] * s.synth_threads
        for c in range(s.circuits):
            k = min(range(s.synth_threads), key=free.__getitem__)
            st = free[k]
            en = st + self._d("synthesis")
            span("synthesis", st, en, root_id, f"thread:synth-{k}", circuit=c)
            free[k] = en + 5_000
        t = max(free)
        nbytes = 1 << 28
        st = t
        t += self._d("pin", s.pin_overhead_ms)
        span("pin", st, t, root_id, "thread:main", nbytes=nbytes * s.circuits)
        # per GPU: h2d, circuits' GPU work, d2h on the GPU's streams
        bg2_free = t
        gpu_done = t
        for g in range(s.gpus):
            stream_t = [t + 30_000 * g] * s.streams

            # The GPU and its streams' clocks are bound as defaults: the closure is called in this iteration only.
            def gspan(name, lane_k, parent, circuit=None, nb=None, dur=None, *, stream_t=stream_t, g=g):
                st0 = stream_t[lane_k]
                dur = dur if dur is not None else self._d(name)
                g0 = st0 + 8_000 + rnd.randrange(4_000)
                g1 = g0 + dur
                en0 = g1 + 3_000 + rnd.randrange(3_000)
                stream_t[lane_k] = en0 + 2_000
                lane = f"stream:{lane_k}"
                return span(name, st0, en0, parent, lane, device=g, circuit=circuit, nbytes=nb, gpu=(g0, g1))

            gspan("h2d", 0, root_id, nb=nbytes * len(range(g, s.circuits, s.gpus)))
            for k in range(1, s.streams):
                stream_t[k] = stream_t[0]
            for c in range(g, s.circuits, s.gpus):
                k = (c // s.gpus) % s.streams
                kids = [self._d(n) for n in _NTT_CHILDREN]
                gap = 4_000
                ntt_id, ntt = gspan("ntt", k, root_id, circuit=c, dur=sum(kids) + gap * (len(kids) + 1))
                ct = ntt["attributes"]["gputrace.gpu.start_ns"] + gap
                for nm, dd in zip(_NTT_CHILDREN, kids, strict=True):
                    span(nm, ct - 2_000, ct + dd + 2_000, ntt_id, f"stream:{k}", device=g, circuit=c, gpu=(ct, ct + dd))
                    ct += dd + gap
                for nm in _MSMS:
                    gspan(nm, k, root_id, circuit=c)
                st = max(bg2_free, t)
                bg2_free = st + self._d("b_g2")
                span("b_g2", st, bg2_free, root_id, "thread:b_g2", circuit=c)
            start_d2h = max(stream_t)
            stream_t[0] = start_d2h
            gspan("d2h", 0, root_id, nb=1 << 20)
            gpu_done = max(gpu_done, stream_t[0])
        st = t
        t = max(gpu_done, bg2_free) + 10_000
        span("sync", st, t, root_id, "thread:main", kind="sync")
        for c in range(s.circuits):
            st = t
            t += self._d("assemble")
            span("assemble", st, t, root_id, "thread:main", circuit=c)
        st = t
        t += self._d("unpin", s.pin_overhead_ms / 2)
        span("unpin", st, t, root_id, "thread:main", nbytes=nbytes * s.circuits)
        t += 30_000
        root["end_ns"] = t
        self.t = t + 200_000 + rnd.randrange(100_000)
        return out


def iter_synthetic(spec: SyntheticSpec) -> Iterator[tuple[dict, list[dict]]]:
    """Yield ``(resource, spans)`` per host batch, hosts interleaved, in time order.

    Honours ``target_spans`` exactly (the last batch is cut; children come after their parent,
    so a cut never leaves a child without its parent).
    """
    rnd = random.Random(spec.seed)
    hosts = [_Host(spec, h, random.Random(rnd.getrandbits(64))) for h in range(spec.hosts)]
    res = [_resource(spec, h) for h in range(spec.hosts)]
    left = spec.target_spans
    nb = 0
    while True:
        if left is None and nb >= spec.batches:
            return
        for h, host in enumerate(hosts):
            spans = host.batch_spans()
            if left is not None:
                spans = spans[:left]
                left -= len(spans)
            yield res[h], spans
            if left == 0:
                return
        nb += 1


def write_synthetic(path: str | os.PathLike, spec: SyntheticSpec | None = None, *, spans_per_line: int = 512,
                    shuffle_lines: bool = False, **kw) -> SyntheticStats:
    """Write a synthetic trace to ``path`` (gzip if it ends in ``.gz``); returns counts.

    Keyword arguments override ``SyntheticSpec`` fields (``write_synthetic(p, target_spans=10**6)``).
    ``shuffle_lines`` writes the lines in a seeded random order (holds them all in memory).
    """
    spec = spec or SyntheticSpec()
    for k, v in kw.items():
        setattr(spec, k, v)
    stats = SyntheticStats(t0_ns=spec.t0_ns)
    opener = gzip.open if str(path).endswith(".gz") else open
    held: list[bytes] = []
    with opener(path, "wb") as f:
        for resource, spans in iter_synthetic(spec):
            for i in range(0, len(spans), spans_per_line):
                chunk = spans[i:i + spans_per_line]
                line = encode_request(resource, chunk) + b"\n"
                stats.spans += len(chunk)
                stats.lines += 1
                stats.bytes += len(line)
                stats.t1_ns = max(stats.t1_ns, max(s["end_ns"] for s in chunk))
                if shuffle_lines:
                    held.append(line)
                else:
                    f.write(line)
        if shuffle_lines:
            random.Random(spec.seed ^ 0x5EED).shuffle(held)
            f.writelines(held)
    return stats


def synthetic_timeline(spec: SyntheticSpec | None = None, **kw):
    """A synthetic trace as a ``Timeline`` (encoded and read back through the real reader)."""
    from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader

    spec = spec or SyntheticSpec()
    for k, v in kw.items():
        setattr(spec, k, v)
    loader = TraceLoader()
    buf = io.BytesIO()
    for resource, spans in iter_synthetic(spec):
        for i in range(0, len(spans), 512):
            buf.write(encode_request(resource, spans[i:i + 512]) + b"\n")
    for n, line in enumerate(buf.getvalue().split(b"\n"), 1):
        loader.feed("<synthetic>", n, line)
    return loader.timeline()
