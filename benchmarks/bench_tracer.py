"""Recorder overhead: a gputrace phase against a raw OpenTelemetry SDK span timed in the same run.

Usage::

    .venv/bin/python benchmarks/bench_tracer.py            # host cases (no GPU needed)
    .venv/bin/python benchmarks/bench_tracer.py --cuda     # + a phase with a CuPy stream (GPU machine)
    .venv/bin/python benchmarks/bench_tracer.py --quick    # fewer repeats

Reference: ``with tracer.start_as_current_span("ntt"): pass`` on an SDK ``TracerProvider`` with one no-op
``SpanProcessor`` (the cheapest real SDK span). Every case runs in its own subprocess (NVTX tools and
GPUTRACE_DISABLE are fixed when the process starts) and times the reference there too, interleaved with
the case, so each ratio compares numbers from one process. Figures are medians over repeats of the
per-iteration time of a ``for`` loop (loop overhead included in both), by default wall time;
``--clock thread`` uses the timing thread's CPU time, steadier on a shared machine. "sustained cpu" is the
process CPU time (caller and exporter threads) per phase for a burst of 5n phases until all are written.

Targets (issue 2, section 6): phase + file sink + NVTX without a tool <= 500 ns and ratio <= 0.06; with a
recording NVTX tool attached <= 700 ns; GPUTRACE_DISABLE=1 <= 100 ns; file writing >= 0.5 M spans/s; a
phase with a CUDA stream <= 3 us host time. The absolute targets were set on a machine where the SDK
span costs ~9 us; on slower machines read the ratios (target ns / 9000 ns).
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
SDK_REF_NS = 9000
CLOCK_NAME = "wall"  # the SDK span cost on the machine the absolute targets were written for

CASES = {
    # name: (env, description, target_ns, target_ratio)
    "file+nvtx": ({}, "phase('ntt', device=0, bytes=n), file sink, NVTX (no tool)", 500, 0.06),
    "file+nvtx-bare": ({}, "phase('ntt'), file sink, NVTX (no tool)", 500, 0.06),
    "nvtx-tool": ({"_TOOL": "1"}, "phase('ntt', device=0, bytes=n), file sink, recording NVTX tool", 700, 700 / SDK_REF_NS),
    "disabled": ({"GPUTRACE_DISABLE": "1"}, "phase('ntt', device=0, bytes=n) with GPUTRACE_DISABLE=1", 100, 100 / SDK_REF_NS),
    "cuda": ({}, "phase('ntt', device=0, stream=s), file sink, NVTX (no tool)", 3000, 3000 / SDK_REF_NS),
}


# ---------------------------------------------------------------------------------------------------
# child side: one case in this process
def _sdk_tracer():
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    tp = TracerProvider()
    tp.add_span_processor(SpanProcessor())  # base class: every hook is a no-op
    return tp.get_tracer("bench")


CLOCK = time.perf_counter_ns  # --clock thread: time.thread_time_ns (CPU time of the timing thread)


def _time_loop(fn, n: int) -> float:
    t0 = CLOCK()
    fn(n)
    return (CLOCK() - t0) / n


def child(case: str, n: int, repeats: int) -> dict:
    import gputrace
    from gputrace.trace import hotpath

    tracer = _sdk_tracer()

    def sdk(k):
        for _ in range(k):
            with tracer.start_as_current_span("ntt"):
                pass

    phase = gputrace.phase
    nbytes = 1 << 20
    stream = None
    if case == "cuda":
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)

    if case == "file+nvtx-bare":
        def ours(k):
            for _ in range(k):
                with phase("ntt"):
                    pass
    elif case == "cuda":
        def ours(k):
            for _ in range(k):
                with phase("ntt", device=0, stream=stream):
                    pass
    else:
        def ours(k):
            for _ in range(k):
                with phase("ntt", device=0, bytes=nbytes):
                    pass

    tmp = tempfile.mkdtemp(prefix="gputrace-bench-")
    gputrace.configure(trace_file=os.path.join(tmp, "bench.jsonl"), collect_gpu_info=False,
                       buffer_size=1 << 22)
    ours(1000)
    sdk(200)
    ref_ns, our_ns = [], []
    n_ref = max(200, n // 10)
    for _ in range(repeats):
        ref_ns.append(_time_loop(sdk, n_ref))
        our_ns.append(_time_loop(ours, n))
        if case == "cuda":
            stream.synchronize()
    # Sustained: CPU time of the whole process (caller + exporter thread) per phase, from the first phase
    # until every one of them is written: what recording really costs a CPU-bound Python program.
    rec = gputrace.get_recorder()
    rec.drain()
    t0 = time.process_time_ns()
    ours(n * 5)
    rec.drain()
    sustained = (time.process_time_ns() - t0) / (n * 5)
    summary = gputrace.shutdown()
    return {
        "case": case,
        "ref_ns": statistics.median(ref_ns),
        "ours_ns": statistics.median(our_ns),
        "ours_min_ns": min(our_ns),
        "ref_min_ns": min(ref_ns),
        "sustained_ns": sustained,
        "spans": summary.spans_recorded,
        "dropped": summary.spans_dropped,
        "nvtx_enabled": hotpath._NV,
        "disabled": hotpath.DISABLED,
    }


def child_write(n: int, repeats: int) -> dict:
    """File writing throughput: finished phases -> span records -> OTLP JSON lines on disk."""
    import gputrace
    from gputrace.trace import MemorySink, hotpath, records
    from gputrace.trace.sinks.jsonl import JsonlFileSink

    mem = MemorySink()
    gputrace.configure(sinks=[mem], collect_gpu_info=False, buffer_size=1 << 22, flush_interval_s=1.0)
    phases = []
    # Prover-shaped: one root per proof with 15 children (so most spans share their trace id).
    for i in range(n // 16):
        with gputrace.phase("prove", circuit=i % 16, batch=i) as root:
            for j in range(15):
                with gputrace.phase("ntt", device=j % 8, bytes=1 << 20) as p:
                    pass
                phases.append(p)
        phases.append(root)
    n = len(phases)
    gputrace.shutdown()
    spans = mem.spans
    assert len(spans) == n
    tmp = tempfile.mkdtemp(prefix="gputrace-bench-")
    enc, conv, full = [], [], []
    for _ in range(repeats):
        sink = JsonlFileSink(os.path.join(tmp, "w.jsonl"))
        sink.start({"service.name": "bench", "host.name": "x"})
        t0 = time.perf_counter_ns()
        sink.export(spans)
        sink.close()
        enc.append(n / ((time.perf_counter_ns() - t0) / 1e9))
        # conversion from recorded phases (exporter-thread work) + writing
        ids = records.IdSource(1)
        for p in phases:
            for attr in ("sid", "tid"):
                try:
                    delattr(p, attr)
                except AttributeError:
                    pass
        sink = JsonlFileSink(os.path.join(tmp, "w2.jsonl"))
        sink.start({"service.name": "bench", "host.name": "x"})
        t0 = time.perf_counter_ns()
        out = [records.to_span(p, ids, 0) for p in phases]
        t1 = time.perf_counter_ns()
        sink.export(out)
        sink.close()
        t2 = time.perf_counter_ns()
        conv.append(n / ((t1 - t0) / 1e9))
        full.append(n / ((t2 - t0) / 1e9))
    size = os.path.getsize(os.path.join(tmp, "w2.jsonl"))
    del hotpath
    return {
        "case": "write",
        "encode_write_spans_s": statistics.median(enc),
        "to_span_spans_s": statistics.median(conv),
        "convert_encode_write_spans_s": statistics.median(full),
        "bytes_per_span": size / n,
    }


# ---------------------------------------------------------------------------------------------------
# parent side
def _nvtx_tool(tmpdir: str) -> str:
    sys.path.insert(0, str(ROOT / "tests"))
    from nvtx_inject.build import build

    return str(build(tmpdir))


def run_case(case: str, n: int, repeats: int, tool: str | None, logdir: str) -> dict:
    env = dict(os.environ)
    env.pop("GPUTRACE_DISABLE", None)
    env.pop("NVTX_INJECTION64_PATH", None)
    extra = dict(CASES.get(case, ({},))[0])
    if extra.pop("_TOOL", None):
        env["NVTX_INJECTION64_PATH"] = tool
        env["NVTX_RECORDER_OUT"] = os.path.join(logdir, f"{case}.nvtx.log")
    env.update(extra)
    cmd = [sys.executable, __file__, "--child", case, "-n", str(n), "--repeats", str(repeats), "--clock", CLOCK_NAME]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"case {case} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda", action="store_true", help="also time a phase with a CuPy stream (needs a GPU)")
    ap.add_argument("--quick", action="store_true", help="fewer iterations and repeats")
    ap.add_argument("-n", type=int, default=None, help="phases per repeat")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="wall: perf_counter_ns; thread: CPU time of the timing thread (steadier on a shared box)")
    a = ap.parse_args(argv)
    n = a.n or (5000 if a.quick else 20000)
    repeats = a.repeats or (5 if a.quick else 11)
    global CLOCK
    if a.clock == "thread":
        CLOCK = time.thread_time_ns
    if a.child:
        res = child_write(n * 10, 3) if a.child == "write" else child(a.child, n, repeats)
        print(json.dumps(res))
        return 0

    global CLOCK_NAME
    CLOCK_NAME = a.clock
    cases = ["file+nvtx", "file+nvtx-bare", "nvtx-tool", "disabled"] + (["cuda"] if a.cuda else [])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tool = _nvtx_tool(tmp)
        for c in cases:
            results.append(run_case(c, n, repeats, tool, tmp))
        write = run_case("write", n, repeats, tool, tmp)

    print(f"gputrace recorder benchmark  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"n={n} x {repeats} repeats, medians, {a.clock} clock)")
    print(f"{'case':<16} {'SDK span ns':>11} {'phase ns':>9} {'ratio':>7} {'min ratio':>9} {'target':>16} "
          f"{'sustained cpu':>13}  ok")
    ok_all = True
    for r in results:
        _, desc, tgt_ns, tgt_ratio = CASES[r["case"]]
        ratio = r["ours_ns"] / r["ref_ns"]
        ok = ratio <= tgt_ratio
        ok_all &= ok
        print(f"{r['case']:<16} {r['ref_ns']:>11.0f} {r['ours_ns']:>9.0f} {ratio:>7.4f} "
              f"{r['ours_min_ns'] / r['ref_min_ns']:>9.4f} {f'<={tgt_ns}ns/{tgt_ratio:.4f}':>16} "
              f"{r['sustained_ns']:>13.0f}  {'yes' if ok else 'NO'}")
    for r in results:
        print(f"  {r['case']}: {CASES[r['case']][1]}; nvtx tool={r['nvtx_enabled']} disabled={r['disabled']} "
              f"spans={r['spans']} dropped={r['dropped']}")
    w_ok = write["convert_encode_write_spans_s"] >= 0.5e6
    print(f"file writing: encode+write {write['encode_write_spans_s'] / 1e6:.2f} M spans/s; "
          f"phase->record {write['to_span_spans_s'] / 1e6:.2f} M spans/s; "
          f"record+encode+write {write['convert_encode_write_spans_s'] / 1e6:.2f} M spans/s "
          f"(target >= 0.5) {'yes' if w_ok else 'NO'}; {write['bytes_per_span']:.0f} bytes/span")
    if a.json:
        Path(a.json).write_text(json.dumps({"results": results, "write": write}, indent=1))
    return 0 if ok_all and w_ok else 1


if __name__ == "__main__":
    sys.exit(main())
