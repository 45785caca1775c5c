"""CUDA activity collection (CUPTI) on the GPU machine: overhead, records/s, agreement with an independent consumer.

Usage (GPU machine, cupti-python installed)::

    python3 benchmarks/bench_cupti.py proof --logn 18 --repeats 3 --keys /tmp/gk     # overhead + agreement
    python3 benchmarks/bench_cupti.py fixture --out tests/data/cupti                 # capture CI fixtures
    python3 benchmarks/bench_cupti.py encode                                         # exporter cost (no GPU)

``proof``: CUDA proofs of 2^logn constraints (every switch on), alternating runs without CUPTI ("plain") and
with gputrace's collection (``GPUTRACE_CUDA_ACTIVITY=1``), each in a fresh process (CUPTI is process-wide);
the overhead is the ratio of median proof wall times (``ProveResult.wall_s``). records/s = CUPTI records the
collector handled / wall of that run. Then one more run with gputrace's phases only and an *independent*
consumer: a plain cupti-python activity client written here (kernels + launch API records, no external
correlation), which attributes each kernel to the innermost gputrace phase whose host interval on the
launching thread holds the launch call. Kernel-busy per phase (union of kernel intervals) from gputrace's
trace (parents by external correlation) is compared with that consumer's, per phase name.

``fixture``: small activity-record fixtures for the CI tests (tests/data/cupti): a phase that launches a
spin kernel after a host sleep, pageable and pinned copies, a memset and a stream sync; the plain records as
the collector saw them, the phases' external ids and spans, and the clock offset.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ proof
def _prove_child(logn: int, keys: str, trace: str, mode: str) -> dict:
    """One proof in this process. mode: plain | cupti | independent."""
    import gputrace
    from gputrace.prover.options import OPT_NAMES, ProveOptions
    from gputrace.prover.pipeline import run_prove

    consumer = _Independent() if mode == "independent" else None
    if consumer:
        consumer.start()
    gputrace.configure(trace_file=trace, cuda_activity=(mode == "cupti"), config={"bench": mode})
    o = ProveOptions(constraints=1 << logn, batch=1, devices=1, backend="cuda", opts=frozenset(OPT_NAMES),
                     out_dir=Path(tempfile.mkdtemp(prefix="bench-cupti-")), key_dir=Path(keys), trace=None,
                     configure_tracer=False)
    r = run_prove(o)
    rec = gputrace.get_recorder()
    records = rec.cupti.records if rec.cupti is not None else 0
    err = rec.cuda_activity_error
    gputrace.shutdown()
    out = {"mode": mode, "wall_s": r.wall_s, "verified": all(r.verified), "records": records, "error": err}
    if consumer:
        out["independent"] = consumer.finish(trace)
    return out


class _Independent:
    """A plain cupti-python activity consumer (no gputrace code): kernels + launch API records."""

    def start(self):
        from cupti import cupti

        self.c = cupti
        self.kernels, self.apis = [], {}
        cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)

        def done(acts):
            for a in acts:
                if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                    self.kernels.append((a.start, a.end, a.correlation_id))
                elif a.kind in (cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
                    old = self.apis.get(a.correlation_id)
                    if old is None or a.start < old[0]:
                        self.apis[a.correlation_id] = (a.start, a.thread_id)

        cupti.activity_register_callbacks(lambda: (8 << 20, 0), done)
        for k in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
            cupti.activity_enable(k)
        a = time.time_ns()
        c = cupti.get_timestamp()
        b = time.time_ns()
        self.offset = (a + b) // 2 - c

    def finish(self, trace: str) -> dict:
        self.c.activity_flush_all(1)
        phases = [s for s in _read_spans(trace) if "gputrace.activity" not in s["attrs"]]
        by_thread: dict = {}
        for p in phases:
            t = p["attrs"].get("thread.id")
            if t is not None:
                by_thread.setdefault(int(t), []).append(p)
        ivals: dict = {}
        for start, end, corr in self.kernels:
            api = self.apis.get(corr)
            if api is None:
                continue
            t = api[0] + self.offset
            best = None
            for p in by_thread.get(int(api[1]), ()):
                if p["start"] <= t <= p["end"] and (best is None or p["start"] > best["start"]):
                    best = p
            name = best["name"] if best else "(none)"
            ivals.setdefault(name, []).append((start, end))
        return {"kernels": len(self.kernels), "busy_ns": {k: _union(v) for k, v in ivals.items()}}


def _read_spans(path: str) -> list:
    out = []
    with open(path) as f:
        for line in f:
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        attrs = {kv["key"]: next(iter(kv["value"].values())) for kv in s.get("attributes", [])}
                        out.append({"name": s["name"], "id": s["spanId"], "parent": s.get("parentSpanId"),
                                    "start": int(s["startTimeUnixNano"]), "end": int(s["endTimeUnixNano"]),
                                    "attrs": attrs})
    return out


def _union(iv) -> int:
    tot, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return tot + (cur_e - cur_s if cur_e is not None else 0)


def gputrace_busy(trace: str) -> dict:
    """Kernel-busy per phase name from a gputrace trace (kernel spans' parents)."""
    spans = _read_spans(trace)
    names = {s["id"]: s["name"] for s in spans}
    iv: dict = {}
    n = 0
    for s in spans:
        if s["attrs"].get("gputrace.activity") == "kernel":
            n += 1
            iv.setdefault(names.get(s["parent"], "(none)"), []).append((s["start"], s["end"]))
    return {"kernels": n, "busy_ns": {k: _union(v) for k, v in iv.items()}}


def proof(args) -> int:
    keys = args.keys
    tmp = Path(tempfile.mkdtemp(prefix="bench-cupti-"))
    results: dict = {"plain": [], "cupti": []}
    rows = []
    for logn in args.logn:
        res = {"plain": [], "cupti": []}
        order = ["plain", "cupti"] * (args.repeats + 1)  # first pair: warm-up (keys, compilation caches)
        last_trace = None
        for i, mode in enumerate(order):
            trace = str(tmp / f"{logn}-{i}-{mode}.jsonl")
            r = _run_child(logn, keys, trace, mode)
            if i >= 2:
                res[mode].append(r)
            if mode == "cupti":
                last_trace = trace
            print(f"  2^{logn} {mode:6s} wall {r['wall_s']:.3f} s records {r['records']} "
                  f"verified {r['verified']} {r.get('error') or ''}", flush=True)
        ind_trace = str(tmp / f"{logn}-independent.jsonl")
        ind = _run_child(logn, keys, ind_trace, "independent")
        plain = statistics.median(x["wall_s"] for x in res["plain"])
        cup = statistics.median(x["wall_s"] for x in res["cupti"])
        recs = statistics.median(x["records"] / x["wall_s"] for x in res["cupti"])
        ours = gputrace_busy(last_trace)
        theirs = ind["independent"]
        print(f"\n2^{logn}: plain {plain:.3f} s, with CUPTI {cup:.3f} s, overhead {100 * (cup / plain - 1):+.2f} % "
              f"(target <= 2 %), {recs:,.0f} records/s; kernels: gputrace {ours['kernels']}, "
              f"independent {theirs['kernels']}")
        print(f"{'phase':<14}{'gputrace ms':>14}{'independent ms':>16}{'diff %':>9}")
        worst = 0.0
        for name in sorted(set(ours["busy_ns"]) | set(theirs["busy_ns"]), key=lambda n: -ours["busy_ns"].get(n, 0)):
            a, b = ours["busy_ns"].get(name, 0), theirs["busy_ns"].get(name, 0)
            d = 100 * (a - b) / b if b else float("inf")
            if b > 0.01 * sum(theirs["busy_ns"].values()):
                worst = max(worst, abs(d))
            print(f"{name:<14}{a / 1e6:>14.3f}{b / 1e6:>16.3f}{d:>9.2f}")
        print(f"largest difference on phases with >= 1 % of kernel time: {worst:.2f} % (target <= 5 %)")
        rows.append({"logn": logn, "plain_s": plain, "cupti_s": cup, "records_per_s": recs, "ours": ours,
                     "independent": theirs, "worst_pct": worst, "runs": res})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _run_child(logn, keys, trace, mode) -> dict:
    env = dict(os.environ)
    env.pop("GPUTRACE_CUDA_ACTIVITY", None)
    r = subprocess.run([sys.executable, __file__, "_child", str(logn), keys, trace, mode], env=env,
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"{mode} 2^{logn} failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- fixture
_SPIN = r"""
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


def fixture(args) -> int:
    import cupy
    import numpy as np

    import gputrace
    from gputrace.trace import MemorySink

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dump = out / "phases_records.jsonl"
    if dump.exists():
        dump.unlink()
    os.environ["GPUTRACE_CUPTI_DUMP"] = str(dump)
    spin = cupy.RawKernel(_SPIN, "spin_ns")
    spin((1,), (1,), (np.uint64(1000),))
    cupy.cuda.Device().synchronize()
    mem = MemorySink()
    rec = gputrace.configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.1, cuda_activity=True)
    assert rec.cupti is not None, rec.cuda_activity_error
    xids = []
    reg = rec.join.register_phase

    def register(xid, tid, sid, start):
        xids.append([xid, sid])
        reg(xid, tid, sid, start)

    rec.join.register_phase = register
    s = cupy.cuda.Stream(non_blocking=True)
    n = 1 << 20
    host = np.ones(n, dtype=np.uint8)
    pin = np.frombuffer(cupy.cuda.alloc_pinned_memory(n), dtype=np.uint8, count=n)
    with gputrace.phase("work", device=0, stream=s):
        time.sleep(0.005)
        with s:
            spin((1,), (1,), (np.uint64(2_000_000),))
        with gputrace.phase("h2d", device=0):
            d = cupy.empty(n, dtype=np.uint8)
            d.set(host, stream=s)
            d.set(pin, stream=s)
            with s:
                cupy.cuda.runtime.memsetAsync(d.data.ptr, 0, n, s.ptr)
        with gputrace.phase("sync", device=0):
            with s:
                spin((1,), (1,), (np.uint64(3_000_000),))
            s.synchronize()
    gputrace.shutdown()
    col = rec.cupti
    spans = [{"name": x["name"], "span_id": x["span_id"], "parent_span_id": x["parent_span_id"],
              "trace_id": x["trace_id"], "start_ns": x["start_ns"], "end_ns": x["end_ns"],
              "lane": x["attributes"].get("gputrace.lane"), "activity": x["attributes"].get("gputrace.activity")}
             for x in mem.spans]
    meta = {"offset_ns": col.offset_ns, "offset_first_ns": col.offset_first_ns, "max_drift_ns": col.max_drift_ns,
            "bracket_ns": col.offset_bracket_ns, "version": col.version, "dropped": col.dropped,
            "records": col.records, "errors": col.errors, "xids": xids, "spans": spans,
            "thread_names": {str(st.ident): st.name for st in __import__("gputrace.trace.hotpath").trace.hotpath._states}}
    (out / "phases_meta.json").write_text(json.dumps(meta, indent=1))
    print(f"fixture: {col.records} records, {len(spans)} spans, offset {col.offset_ns} ns "
          f"(bracket {col.offset_bracket_ns} ns, drift {col.max_drift_ns} ns), errors {col.errors}")
    return 0


def encode(args) -> int:
    """Exporter cost of writing stream phases without device times (CUDA activity on): the file sink's cached
    text per shape against its attribute-by-attribute path, alternating, min of ``--repeats`` (no GPU needed)."""
    import gputrace
    from gputrace.trace import records
    from gputrace.trace.sinks import MemorySink, phase_json

    rec = gputrace.configure(sinks=[MemorySink()], collect_gpu_info=False, flush_interval_s=1.0)
    rec._stop.set()  # park the exporter: the phases stay buffered
    for _ in range(args.n):
        with gputrace.phase("ntt", device=0):
            pass
    phases = rec._collect()
    gputrace.shutdown()
    for p in phases:
        p.cdev = (0, "stream:14", None, None)  # as cuda_timing leaves a stream phase when events are off
    cached = phase_json._cd_fragment

    def run(fast: bool) -> float:
        for p in phases:
            p.__dict__.pop("sid", None)
            p.__dict__.pop("tid", None)
        phase_json._cd_fragment = cached if fast else (lambda p, cd: None)
        try:
            t0 = time.perf_counter_ns()
            phase_json.encode_phases(phases, records.IdSource(1), 0)
            return (time.perf_counter_ns() - t0) / len(phases)
        finally:
            phase_json._cd_fragment = cached

    for _ in range(args.rounds):
        slow = min(run(False) for _ in range(args.repeats))
        fast = min(run(True) for _ in range(args.repeats))
        print(f"per stream phase without device times: attribute by attribute {slow:,.0f} ns, cached text {fast:,.0f} ns")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        print(json.dumps(_prove_child(int(argv[1]), argv[2], argv[3], argv[4])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("proof")
    p.add_argument("--logn", type=lambda s: [int(x) for x in s.split(",")], default=[18])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--keys", default="/tmp/gk")
    p.add_argument("--json")
    p.set_defaults(func=proof)
    f = sub.add_parser("fixture")
    f.add_argument("--out", default=str(ROOT / "tests" / "data" / "cupti"))
    f.set_defaults(func=fixture)
    e = sub.add_parser("encode")
    e.add_argument("-n", type=int, default=20000)
    e.add_argument("--repeats", type=int, default=7)
    e.add_argument("--rounds", type=int, default=4)
    e.set_defaults(func=encode)
    a = ap.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
