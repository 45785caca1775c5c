#!/usr/bin/env python3
"""Build, check and benchmark all GPU code in one call (the device machine's one script).

    python3 benchmarks/gpu_all.py [--quick] [--ntt 20,22,24] [--msm 16,20,24] [--proof 16] [--keys DIR]

Sections, in order (each one's failure is reported and the rest still run):
1. build: compile the CUDA modules (time), list registers / local bytes per kernel;
2. tests: ``pytest -m gpu tests/gpu`` (kernels vs CPU oracles, backend vs CPU backend, a GPU proof,
   the recorder's CUDA timing tests), then ``benchmarks/bench_tracer.py --cuda`` if present;
3. ntt: forward Fr NTT at each size for each ``FrNtt`` implementation (``NTT_IMPLS``), median of CUDA-event
   times over repeats, as a fraction of the integer-multiply bound (issue 4: about 3.3 ms at 2^24, scaled by
   n log n); coset / inverse coset at the largest size and the prover's a, b, c batch at 2^20; CUPTI kernel time
   per kernel and per launch of each; every implementation checked bit for bit against ``radix2``;
4. msm: G1 MSM of random full-width scalars, median wall time with the result on the host, checked
   against arkworks at <= 2^20, window sweep; bound: about 70 ms at 2^24 (scaled by n);
5. h2d: pageable vs pinned (cudaHostRegister) host-to-device bandwidth, 64 MiB .. 4 GiB, and what
   registering costs per GiB;
6. proof: whole Groth16 proofs, CUDA vs CPU backend, per-phase seconds and speed-up;
7. multi: the same batch of G circuits (G = ``--gpus``, default every visible GPU) on 1 GPU and split
   across G GPUs, every proof verified, per-phase seconds per device and the 1 -> G scaling;
8. prover (``--prover N``): ``bench_prover_gpu.py`` (before/after 2^N proof, batch throughput on 1 and G
   GPUs, CUPTI kernel-busy share);
9. keygen (``--keygen-kernel N``, ``--largest 22,24``): ``bench_keygen_gpu.py`` (fixed-base kernels, device key
   generation and the largest proofs on one GPU, keys in /tmp/gk-largest);
10. cupti: ``benchmarks/bench_cupti.py`` when present.
Writes ``$OUT/gpu_all.json`` (every figure), ``$OUT/pytest.log``, ``$OUT/proof-trace-2_N.jsonl``,
``$OUT/multi-2_N-Kgpu.jsonl``; prints a short table last.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT") or ROOT / "gpu-out")
OUT.mkdir(parents=True, exist_ok=True)
RESULTS: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv)}
TABLE: list[tuple[str, str, str]] = []
INT_BOUND_NTT_2_24_MS = 3.3   # issue 4: integer-multiply bound at 1.67e13 32-bit mul-adds/s
INT_BOUND_MSM_2_24_MS = 70.0
PYTEST_TIMEOUT_S = 360
INLINE_VARIANT = False  # --inline-variant: also time the msm_inline build (its NVRTC build takes about a minute)


def row(item: str, value: str, target: str = "") -> None:
    TABLE.append((item, value, target))
    print(f"  {item:<34} {value:<40} {target}", flush=True)


START = time.perf_counter()
DEADLINE_S = float("inf")  # --deadline: sections that would start later are skipped (the table still prints)


def section(name: str, fn, *a) -> None:
    print(f"\n== {name} ==", flush=True)
    if time.perf_counter() - START > DEADLINE_S:
        row(f"{name}", f"skipped: --deadline {DEADLINE_S:.0f} s passed")
        return
    t = time.perf_counter()
    try:
        fn(*a)
    except Exception as exc:  # keep going: one broken section must not hide the others
        traceback.print_exc()
        RESULTS.setdefault("errors", {})[name] = repr(exc)
        row(f"{name}: ERROR", repr(exc)[:60])
    RESULTS.setdefault("section_s", {})[name] = time.perf_counter() - t
    print(f"   ({name}: {time.perf_counter() - t:.1f} s)", flush=True)
    (OUT / "gpu_all.json").write_text(json.dumps(RESULTS, indent=1, default=str))  # partial results survive a kill


def events_ms(fn, repeats: int, warmup: int = 1) -> list[float]:
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    out = []
    for _ in range(repeats):
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        out.append(cupy.cuda.get_elapsed_time(e0, e1))
    return out


# -- 1. build -------------------------------------------------------------------------------
def build() -> None:
    import cupy

    from gputrace.prover.backends import cuda_kernels as ck

    dev = cupy.cuda.Device(0)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    RESULTS["device"] = dict(name=props["name"].decode(), sms=props["multiProcessorCount"],
                             cc=dev.compute_capability, l2=props["l2CacheSize"])
    for m in ck.MODULES:
        if m == "msm_inline" and not INLINE_VARIANT:  # its NVRTC build takes about a minute
            continue
        t = time.perf_counter()
        ck.module(m, 0)
        dt = time.perf_counter() - t
        row(f"build {m}.cu", f"{dt:.1f} s")
    rep = ck.kernel_report(0)
    RESULTS["kernels"] = rep
    for r in rep:
        print(f"  {r['module']:>4} {r['kernel']:<20} regs {r['registers']:>3}  local {r['local_bytes']:>5} B"
              f"  max threads {r['max_threads']}")


# -- 2. tests ---------------------------------------------------------------------------------
def tests(quick: bool, tracer_bench: bool = True, keys: Path = ROOT / ".gpukeys") -> None:
    env = dict(os.environ)
    env.setdefault("GPUTRACE_GPU_TEST_KEYS", str(keys))  # the 2^18 test's keys serve the proof section
    if quick:
        env.setdefault("GPUTRACE_GPU_TEST_LOGN", "1,5,11")
        env.setdefault("GPUTRACE_GPU_TEST_MSM", "1,100,2000")
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-rA", "-p", "no:cacheprovider",
           "--durations=12"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)
    log = p.stdout + p.stderr
    (OUT / "pytest.log").write_text(log)
    lines = [ln for ln in log.splitlines() if ln.strip()]
    summary = lines[-1] if lines else "(no output)"
    RESULTS["pytest"] = dict(rc=p.returncode, summary=summary)
    print("\n".join(ln for ln in lines if ln.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED")))[-6000:])
    row("pytest -m gpu tests/gpu", summary[:60], "all pass")
    bt = ROOT / "benchmarks" / "bench_tracer.py"
    if bt.exists() and tracer_bench:
        p = subprocess.run([sys.executable, str(bt), "--cuda"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=240)
        out = (p.stdout + p.stderr).strip().splitlines()
        RESULTS["bench_tracer_cuda"] = dict(rc=p.returncode, tail=out[-25:])
        print("\n".join(out[-25:]))
        row("bench_tracer.py --cuda", f"rc={p.returncode}")


# -- 3. NTT -----------------------------------------------------------------------------------
def rand_fr(n: int, m: int = 1):
    import cupy

    rng = np.random.default_rng(12345 + n)
    host = rng.integers(0, np.iinfo(np.uint64).max, size=(m, n, 4), dtype=np.uint64, endpoint=True)
    host[..., 3] &= np.uint64(0x3FFFFFFFFFFFFFFF)  # < 2^254 < r: canonical, full width
    return cupy.asarray(host)


NTT_IMPLS = ("radix2", "pass", "pass_e4")  # cuda_ntt.FrNtt implementations, timed side by side


def ntt_cupti(runs: dict, repeats: int) -> dict:
    """CUPTI kernel time of each callable in ``runs`` (``CuptiCollector`` directly, no recorder): for each
    name, the median over ``repeats`` calls of every kernel's summed device time per call (``kernels_ms``),
    of their total (``total_ms``), of first-start to last-end (``span_ms``) and of each launch in order
    (``per_launch_ms``). Each call is followed by a synchronize and a forced flush, so a call's records are
    exactly its kernels."""
    import cupy

    from gputrace.trace.cupti_collect import CuptiCollector, CuptiUnavailable

    col = CuptiCollector()
    try:
        col.start()
    except CuptiUnavailable as exc:
        return {"error": str(exc)}
    out: dict = {}
    try:
        for name, fn in runs.items():
            reps = []
            for _ in range(repeats):
                cupy.cuda.get_current_stream().synchronize()
                col.collect(force=True)  # drop what came before
                fn()
                cupy.cuda.get_current_stream().synchronize()
                ks = [r for r in col.collect(force=True) if r.get("kind") in ("CONCURRENT_KERNEL", "KERNEL")]
                per: dict = {}
                for r in ks:
                    per[r["name"]] = per.get(r["name"], 0) + (r["end"] - r["start"])
                span = (max(r["end"] for r in ks) - min(r["start"] for r in ks)) if ks else 0
                seq = [(r["name"], r["end"] - r["start"]) for r in sorted(ks, key=lambda r: r["start"])]
                reps.append((per, span, len(ks), seq))
            names = sorted({k for r in reps for k in r[0]})
            nl = min(len(r[3]) for r in reps)
            out[name] = {
                "kernels_ms": {k: statistics.median(r[0].get(k, 0) for r in reps) / 1e6 for k in names},
                "total_ms": statistics.median(sum(r[0].values()) for r in reps) / 1e6,
                "span_ms": statistics.median(r[1] for r in reps) / 1e6,
                "launches": reps[0][2] if reps else 0,
                # each launch in start order (kernel, median ms): the per-pass breakdown
                "per_launch_ms": [(reps[0][3][i][0], statistics.median(r[3][i][1] for r in reps) / 1e6)
                                  for i in range(nl)],
            }
    finally:
        col.stop()
    return out


def ntt_bench(sizes: list[int], repeats: int) -> None:
    """Forward Fr NTT per size and implementation (CUDA events, median), the prover's shapes at the largest
    size (coset forward, inverse coset) and at 2^20 (a, b, c as one batch of 3), CUPTI kernel time per kernel
    of each, and a check that every implementation gives the radix-2 result bit for bit."""
    import cupy

    from gputrace.prover.backends.cuda_ntt import FrNtt
    from gputrace.prover.ntt import cuda_pass_plan

    engs = {impl: FrNtt(0, impl=impl) for impl in NTT_IMPLS}
    res: dict = {"events": {}, "cupti": {}, "equal_to_radix2": {}}
    runs: dict = {}
    big = max(sizes)
    for logn in sizes:
        n = 1 << logn
        a = rand_fr(n)
        engs["pass"].to_mont(a, None)
        ref = a.copy()  # every implementation transforms a copy of the same input before any timing
        engs["radix2"].transform(ref, inverse=False, coset=False, stream=None)
        for impl, eng in engs.items():
            if impl != "radix2":
                x = a.copy()
                eng.transform(x, inverse=False, coset=False, stream=None)
                res["equal_to_radix2"][f"{impl} 2^{logn}"] = bool(cupy.array_equal(x, ref))
                del x
        del ref
        for impl, eng in engs.items():
            ms = events_ms(lambda e=eng, y=a: e.transform(y, inverse=False, coset=False, stream=None), repeats,
                           warmup=2)
            med = statistics.median(ms)
            bound = INT_BOUND_NTT_2_24_MS * (n * logn) / ((1 << 24) * 24)
            passes = (1 + 1 + math.ceil(max(0, logn - 10) / 2)) if impl == "radix2" else len(cuda_pass_plan(logn))
            gbps = passes * 2 * n * 32 / (med * 1e-3) / 1e9
            res["events"][f"{impl} fwd 2^{logn}"] = dict(median_ms=med, all_ms=ms, bound_ms=bound,
                                                         fraction_of_bound=bound / med, global_passes=passes,
                                                         effective_GBps=gbps)
            if logn == big:
                runs[f"{impl} fwd 2^{logn}"] = (lambda e=eng, y=a: e.transform(y, inverse=False, coset=False,
                                                                             stream=None))
        if logn == big:
            for impl, eng in engs.items():
                for inv, cos, what in ((False, True, "coset"), (True, True, "inv coset")):
                    def fn(e=eng, i=inv, c=cos, y=a):
                        e.transform(y, inverse=i, coset=c, stream=None)
                    ms = events_ms(fn, repeats, warmup=2)
                    res["events"][f"{impl} {what} 2^{logn}"] = dict(median_ms=statistics.median(ms), all_ms=ms)
                    runs[f"{impl} {what} 2^{logn}"] = fn
        del a
    # the prover's shape: a, b, c of 2^20 as one (3, n, 4) batch, inverse then coset forward
    b3 = rand_fr(1 << 20, 3)
    engs["pass"].to_mont(b3, None)
    for impl, eng in engs.items():
        def prover_ntts(e=eng, y=b3):
            e.transform(y, inverse=True, coset=False, stream=None)
            e.transform(y, inverse=False, coset=True, stream=None)
        ms = events_ms(prover_ntts, repeats, warmup=2)
        res["events"][f"{impl} intt+coset 3x2^20"] = dict(median_ms=statistics.median(ms), all_ms=ms)
        runs[f"{impl} intt+coset 3x2^20"] = prover_ntts
    res["cupti"] = ntt_cupti(runs, 3)
    del b3
    cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["ntt"] = res
    for key, ev in res["events"].items():
        cu = res["cupti"].get(key, {}) if isinstance(res["cupti"], dict) else {}
        extra = ""
        if "fraction_of_bound" in ev:
            extra = f", {ev['fraction_of_bound']:.0%} of int bound, {ev['effective_GBps']:.0f} GB/s"
        kern = f"; CUPTI {cu['total_ms']:.2f} ms" if "total_ms" in cu else ""
        tgt = "<= 6 ms" if key == f"pass fwd 2^{big}" and big == 24 else ""
        row(f"NTT {key}", f"{ev['median_ms']:.2f} ms event{kern}{extra}", tgt)
    for key, cu in (res["cupti"].items() if isinstance(res["cupti"], dict) else []):
        if isinstance(cu, dict) and "kernels_ms" in cu:
            print(f"  CUPTI {key}: " + ", ".join(f"{k} {v:.3f}" for k, v in cu["kernels_ms"].items())
                  + f" (total {cu['total_ms']:.3f} ms, span {cu['span_ms']:.3f} ms, {cu['launches']} launches)")
            if len(cu["per_launch_ms"]) <= 12:
                print("    launches: " + ", ".join(f"{k} {v:.3f}" for k, v in cu["per_launch_ms"]))
    if "error" in res["cupti"]:
        row("NTT CUPTI", f"not collected: {res['cupti']['error']}"[:60])
    bad = [k for k, ok in res["equal_to_radix2"].items() if not ok]
    row("NTT implementations agree", "yes" if not bad else f"NO: {', '.join(bad)}")
    if bad:
        raise RuntimeError(f"NTT implementations differ from radix2: {bad}")


# -- 4. MSM -----------------------------------------------------------------------------------
def distinct_points(count: int):
    from py_arkworks_bls12381 import G1Point

    from gputrace.prover.field import R, ints_to_limbs, limbs_to_scalars

    rng = np.random.default_rng(7)
    g = G1Point()
    base = [g * s for s in limbs_to_scalars(ints_to_limbs([int(x) % R for x in rng.integers(1, 2**62, 64)]))]
    pts, acc = [], base[0]
    for i in range(count):
        acc = acc + base[i % 64]
        pts.append(acc)
    return pts


#: MSM engines compared by ``--msm-ab`` (name -> module, G1Msm keywords), each at the default window of its
#: digit kind. "c64" is the engine as it was before issue 13's MSM work (64-bit C Fq arithmetic, unsigned
#: digits, S-long chunks, argsort); its module is msm.cu built with -DGPUTRACE_MSM_FQ_C64, registered here for
#: the benchmark only. The default engine (``G1Msm(0)``) is "ptx-signed-balanced" from 2^22 scalars and
#: "ptx-signed-chunks" below.
MSM_VARIANTS = {
    "c64": ("msm_c64", dict(signed=False, even_chunks=False, sort="argsort", balanced=False)),
    "ptx-unsigned": ("msm", dict(signed=False, even_chunks=False, sort="argsort", balanced=False)),
    "ptx-signed-chunks": ("msm", dict(signed=True, even_chunks=True, sort="counting", balanced=False)),
    "ptx-signed-balanced": ("msm", dict(signed=True, sort="counting", balanced=True)),
}
MSM_AB = False      # --msm-ab: the engines above side by side at the largest MSM size
MSM_CUPTI = False   # --msm-cupti: per-kernel CUPTI time of each engine at the largest MSM size
MSM_WINDOWS = ""    # --msm-windows: comma list of windows for the signed engine's sweep at the largest size


def cupti_kernel_ms(runs: dict, repeats: int) -> dict:
    """Per-kernel device time (CUPTI through gputrace's own collection) of each callable in ``runs``:
    {name: {"kernels_ms": {kernel: median ms per call}, "total_ms": median of the sum, "span_ms": median of
    first kernel start -> last kernel end}}. Each call runs inside a phase named ``name#repeat``; kernels are
    attributed to it by CUPTI's external correlation."""
    import gputrace
    from gputrace.trace import MemorySink

    mem = MemorySink()
    rec = gputrace.configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.1, cuda_activity=True)
    if rec.cupti is None:
        gputrace.shutdown()
        return {"error": str(rec.cuda_activity_error)}
    for name, fn in runs.items():
        for r in range(repeats):
            with gputrace.phase(f"{name}#{r}"):
                fn()
    gputrace.shutdown()
    spans = mem.spans
    names = {x["span_id"]: x["name"] for x in spans}
    per: dict = {}
    for x in spans:
        a = x["attributes"]
        if a.get("gputrace.activity") != "kernel":
            continue
        ph = names.get(x["parent_span_id"], "(none)#0")
        run, _, rep = ph.rpartition("#")
        d = per.setdefault(run or ph, {}).setdefault(rep, {"k": {}, "t0": None, "t1": None})
        t0, t1 = int(a["gputrace.gpu.start_ns"]), int(a["gputrace.gpu.end_ns"])
        d["k"][x["name"]] = d["k"].get(x["name"], 0) + (t1 - t0)
        d["t0"] = t0 if d["t0"] is None else min(d["t0"], t0)
        d["t1"] = t1 if d["t1"] is None else max(d["t1"], t1)
    out: dict = {}
    for run, reps in per.items():
        kn = sorted({k for d in reps.values() for k in d["k"]})
        out[run] = {
            "kernels_ms": {k: statistics.median(d["k"].get(k, 0) for d in reps.values()) / 1e6 for k in kn},
            "total_ms": statistics.median(sum(d["k"].values()) for d in reps.values()) / 1e6,
            "span_ms": statistics.median(d["t1"] - d["t0"] for d in reps.values()) / 1e6,
            "repeats": len(reps),
        }
    return out


def msm_bench(sizes: list[int], repeats: int) -> None:
    import cupy
    from py_arkworks_bls12381 import G1Point

    from gputrace.prover.backends import cuda_kernels as ck
    from gputrace.prover.backends.cuda_msm import G1Msm, engine_window, xyzz_to_g1
    from gputrace.prover.encoding import g1_to_affine_limbs
    from gputrace.prover.field import limbs_to_scalars

    ck.MODULES.setdefault("msm_c64", ("msm.cu", ("-DGPUTRACE_MSM_FQ_C64",)))
    P = 1 << 16
    t = time.perf_counter()
    pts = distinct_points(P)
    print(f"  {P} distinct base points on the CPU in {time.perf_counter() - t:.1f} s (tiled to larger sizes)")
    eng = G1Msm(0)
    base = eng.load_bases(g1_to_affine_limbs(pts), None)
    res = {}
    for logn in sizes:
        n = 1 << logn
        bases = cupy.tile(base, (max(1, n // P), 1))[:n] if n > P else base[:n]
        sc = rand_fr(n)[0]

        def run(w=None, e=eng):
            return e.msm(bases, sc, w, None).get()

        def timed(fn, reps):
            fn()
            out_ms = []
            for _ in range(reps):
                t0 = time.perf_counter()
                o = fn()
                out_ms.append((time.perf_counter() - t0) * 1e3)
            return o, out_ms
        out, times = timed(run, repeats if logn < 24 else max(2, repeats // 2))
        med = statistics.median(times)
        bound = INT_BOUND_MSM_2_24_MS * n / (1 << 24)
        entry = dict(median_ms=med, all_ms=times, window=engine_window(n, eng.signed), bound_ms=bound,
                     fraction_of_bound=bound / med, signed=eng.signed)
        if logn <= 16:
            host_sc = sc.get()
            t0 = time.perf_counter()
            want = G1Point.multiexp_unchecked([pts[i % P] for i in range(n)], limbs_to_scalars(host_sc))
            entry["arkworks_cpu_ms"] = (time.perf_counter() - t0) * 1e3
            entry["matches_arkworks"] = bool(xyzz_to_g1(out) == want)
        sweep = {}
        dw = engine_window(n, eng.signed)
        cands = {dw - 2, dw - 1, dw + 1, dw + 2}
        if logn == max(sizes) and MSM_WINDOWS:
            cands |= {int(w) for w in MSM_WINDOWS.split(",")}
        for w in sorted(cands - {dw}):
            if 4 <= w <= 20:
                o2, ms = timed(lambda w=w: run(w), 1 if logn < 24 else 2)
                sweep[w] = statistics.median(ms)
                if xyzz_to_g1(o2) != xyzz_to_g1(out):
                    entry.setdefault("sweep_mismatch", []).append(w)
        entry["window_sweep_ms"] = sweep
        prof: dict = {}
        eng.msm(bases, sc, None, None, profile=prof)
        entry["steps_ms"] = prof
        print("    steps (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in prof.items() if k not in ("window", "windows")))
        if logn == max(sizes) and (MSM_AB or MSM_CUPTI):
            engines = {}
            for name, (mod, kw) in MSM_VARIANTS.items():
                t0 = time.perf_counter()
                engines[name] = e = G1Msm(0, mod, **kw)
                o2, ms = timed(lambda e=e: run(None, e), 2)
                same = bool(xyzz_to_g1(o2) == xyzz_to_g1(out))
                entry.setdefault("ab", {})[name] = dict(median_ms=statistics.median(ms), all_ms=ms, same_result=same,
                                                        build_and_first_s=time.perf_counter() - t0 - sum(ms) / 1e3)
                row(f"  MSM 2^{logn} engine {name}", f"{statistics.median(ms):.1f} ms host wall, same={same}")
                if kw.get("signed"):  # the signed engines' own window sweep around the default
                    dwe = engine_window(n, True)
                    for w in (dwe - 2, dwe - 1, dwe + 1):
                        o3, ms3 = timed(lambda w=w, e=e: run(w, e), 1)
                        entry["ab"][name].setdefault("sweep_ms", {})[w] = ms3[0]
                        same = same and bool(xyzz_to_g1(o3) == xyzz_to_g1(out))
                    print(f"    engine {name} sweep (ms): "
                          + ", ".join(f"c={w}: {v:.1f}" for w, v in entry["ab"][name]["sweep_ms"].items()))
                if not same:
                    entry.setdefault("errors", []).append(f"engine {name} differs")
            if MSM_CUPTI:
                best = min(sweep.items(), key=lambda kv: kv[1])[0] if sweep and min(sweep.values()) < med else None
                runs = {name: (lambda e=e: run(None, e)) for name, e in engines.items()}
                if best is not None:
                    runs[f"ptx-signed-c{best}"] = lambda: run(best)
                ck_ms = cupti_kernel_ms(runs, 2)
                entry["cupti"] = ck_ms
                for name, r in ck_ms.items():
                    if not isinstance(r, dict):
                        continue
                    top = sorted(r["kernels_ms"].items(), key=lambda kv: -kv[1])[:6]
                    print(f"    CUPTI {name}: kernels {r['total_ms']:.1f} ms, first->last {r['span_ms']:.1f} ms: "
                          + ", ".join(f"{k} {v:.1f}" for k, v in top))
                    row(f"  MSM 2^{logn} {name} CUPTI", f"{r['total_ms']:.1f} ms kernels, {r['span_ms']:.1f} ms span")
        res[logn] = entry
        chk = {True: ", = arkworks", False: ", WRONG vs arkworks"}.get(entry.get("matches_arkworks"), "")
        if entry.get("sweep_mismatch"):
            chk += f", windows {entry['sweep_mismatch']} DIFFER"
        tgt = "<= 150 ms" if logn == 24 else ""
        row(f"MSM G1 2^{logn} (c={entry['window']}, {prof.get('windows')} win)",
            f"{med:.1f} ms ({bound / med:.0%} of bound{chk})", tgt)
        if sweep:
            print("    window sweep (ms): " + ", ".join(f"c={w}: {v:.1f}" for w, v in sweep.items()))
        del bases, sc
        cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["msm"] = res
    if any(e.get("matches_arkworks") is False or e.get("sweep_mismatch") or e.get("errors") for e in res.values()):
        raise RuntimeError("an MSM result differs from arkworks or between windows/engines")


def g2_bench(sizes: list[int], repeats: int) -> None:
    """G2 MSM (the device ``b_g2``): 2^12 distinct points tiled, random full-width scalars; checked against
    arkworks at 2^12."""
    import cupy
    from py_arkworks_bls12381 import G2Point, Scalar

    from gputrace.prover.backends.cuda_msm import G2Msm, engine_window, xyzz_to_g2
    from gputrace.prover.encoding import g2_to_affine_limbs
    from gputrace.prover.field import limbs_to_scalars

    P = 1 << 12
    base = [G2Point() * Scalar(7 + 1000003 * i) for i in range(16)]
    pts, acc = [], base[0]
    for i in range(P):
        acc = acc + base[i % 16]
        pts.append(acc)
    eng = G2Msm(0)
    dbase = eng.load_bases(g2_to_affine_limbs(pts), None)
    sc = rand_fr(P)[0]
    ok = xyzz_to_g2(eng.msm(dbase, sc, None, None).get()) == G2Point.multiexp_unchecked(pts, limbs_to_scalars(sc.get()))
    res = {"matches_arkworks_2_12": bool(ok)}
    for logn in sizes:
        n = 1 << logn
        bases = cupy.tile(dbase, (max(1, n // P), 1))[:n] if n > P else dbase[:n]
        sc = rand_fr(n)[0]
        eng.msm(bases, sc, None, None).get()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            eng.msm(bases, sc, None, None).get()
            times.append((time.perf_counter() - t0) * 1e3)
        prof: dict = {}
        eng.msm(bases, sc, None, None, profile=prof)
        res[logn] = dict(median_ms=statistics.median(times), all_ms=times, window=engine_window(n, eng.signed), steps_ms=prof)
        row(f"MSM G2 2^{logn} (c={engine_window(n, eng.signed)})", f"{statistics.median(times):.1f} ms (= arkworks at 2^12: {ok})")
        del bases, sc
        cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["msm_g2"] = res


# -- 5. H2D -----------------------------------------------------------------------------------
def h2d_bench(sizes_mib: list[int]) -> None:
    import cupy

    rt = cupy.cuda.runtime
    res = {}
    s = cupy.cuda.Stream(non_blocking=True)
    for mib in sizes_mib:
        nbytes = mib << 20
        host = np.ones(nbytes // 8, dtype=np.uint64)  # touched pages
        dev = cupy.empty(host.shape, dtype=np.uint64)

        def copy():
            dev.set(host, stream=s)
            s.synchronize()
        copy()
        pg = []
        for _ in range(3):
            t0 = time.perf_counter(); copy(); pg.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rt.hostRegister(host.ctypes.data, nbytes, 0)
        reg = time.perf_counter() - t0
        try:
            pn = []
            for _ in range(3):
                t0 = time.perf_counter(); copy(); pn.append(time.perf_counter() - t0)
        finally:
            t0 = time.perf_counter()
            rt.hostUnregister(host.ctypes.data)
            unreg = time.perf_counter() - t0
        gib = nbytes / 2**30
        e = dict(pageable_GBps=nbytes / statistics.median(pg) / 1e9, pinned_GBps=nbytes / statistics.median(pn) / 1e9,
                 register_s=reg, unregister_s=unreg, register_ms_per_GiB=reg / gib * 1e3,
                 unregister_ms_per_GiB=unreg / gib * 1e3)
        res[mib] = e
        row(f"H2D {mib} MiB", f"pageable {e['pageable_GBps']:.1f} / pinned {e['pinned_GBps']:.1f} GB/s, "
            f"reg {e['register_ms_per_GiB']:.0f} ms/GiB")
        del host, dev
        cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["h2d"] = res


# -- 6. proof ---------------------------------------------------------------------------------
def proof_bench(sizes: list[int], keys: Path, cpu: bool, warmup: int = 1) -> None:
    import gputrace
    from gputrace.prover.options import OPT_NAMES, ProveOptions
    from gputrace.prover.pipeline import run_prove

    res = {}
    for logn in sizes:
        entry = {}
        tmp = Path(tempfile.mkdtemp(prefix="gputrace-proof-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        # The first size also gets a warm-up CUDA run (module load, CuPy pools); later sizes are warm.
        last = warmup if logn == sizes[0] else 0
        runs = [("cuda", r) for r in range(last + 1)] + ([("cpu", 0)] if cpu else [])
        for backend, rep in runs:
            trace = OUT / f"proof-trace-2_{logn}.jsonl" if (backend == "cuda" and rep == last) else None
            o = ProveOptions(constraints=1 << logn, batch=1, devices=1, backend=backend, opts=frozenset(OPT_NAMES),
                             out_dir=tmp / f"{backend}{rep}", key_dir=keys, trace=trace, configure_tracer=True)
            t0 = time.perf_counter()
            r = run_prove(o)
            total = time.perf_counter() - t0
            phases = {}
            for (name, _label), sec in r.phase_seconds.items():
                phases[name] = phases.get(name, 0.0) + sec
            entry[f"{backend}{rep}"] = dict(wall_s=r.wall_s, setup_s=r.setup_s, total_s=total, verified=r.verified,
                                            key_cached=r.key_cached, phases=phases)
            print(f"  2^{logn} {backend} run {rep}: prove {r.wall_s:.2f} s, setup {r.setup_s:.1f} s, "
                  f"verified {r.verified}")
        g = entry[f"cuda{last}"]
        names = [p for p in ("synthesis", "pin", "h2d", "ntt", "msm_h", "batch_add", "msm_l", "msm_a", "msm_b_g1",
                             "b_g2", "sync", "assemble", "unpin") if p in g["phases"]]
        print("    phase        cuda s    cpu s   speed-up")
        for p in names:
            c = entry.get("cpu0", {}).get("phases", {}).get(p)
            sp = f"{c / g['phases'][p]:.1f}x" if c and g["phases"][p] > 0 else ""
            print(f"    {p:<12} {g['phases'][p]:7.3f}  {c if c is not None else float('nan'):7.3f}   {sp}")
        sp = entry["cpu0"]["wall_s"] / g["wall_s"] if "cpu0" in entry else None
        res[logn] = entry
        row(f"proof 2^{logn} (batch 1)", f"cuda {g['wall_s']:.2f} s" + (f", cpu {entry['cpu0']['wall_s']:.2f} s, "
            f"{sp:.1f}x" if sp else "") + f", verified={all(g['verified'])}")
    RESULTS["proof"] = res


# -- 7. multi-GPU -----------------------------------------------------------------------------
def multi_bench(sizes: list[int], keys: Path, gpus: int) -> None:
    """G circuits on 1 GPU (batch G) against the same G circuits split over G GPUs (batch 1 each)."""
    import cupy

    from gputrace.prover.options import OPT_NAMES, ProveOptions
    from gputrace.prover.pipeline import run_prove

    visible = cupy.cuda.runtime.getDeviceCount()
    g = gpus or visible
    RESULTS.setdefault("multi", {})["visible_gpus"] = visible
    if g < 2 or g > visible:
        row("multi-GPU", f"skipped: {visible} GPU(s) visible, --gpus {gpus}")
        return
    for logn in sizes:
        entry = {}
        tmp = Path(tempfile.mkdtemp(prefix="gputrace-multi-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        for ndev, batch in ((1, g), (g, 1)):
            trace = OUT / f"multi-2_{logn}-{ndev}gpu.jsonl"
            o = ProveOptions(constraints=1 << logn, batch=batch, devices=ndev, backend="cuda",
                             opts=frozenset(OPT_NAMES), out_dir=tmp / f"{ndev}gpu", key_dir=keys, trace=trace,
                             configure_tracer=True)
            r = run_prove(o)
            per_dev: dict[str, dict[str, float]] = {}
            for (name, label), sec in r.phase_seconds.items():
                per_dev.setdefault(label, {})[name] = sec
            entry[f"{ndev}gpu"] = dict(wall_s=r.wall_s, setup_s=r.setup_s, verified=r.verified, circuits=len(r.verified),
                                       phases=per_dev)
            print(f"  2^{logn}: {len(r.verified)} circuits on {ndev} GPU(s): prove {r.wall_s:.2f} s, "
                  f"verified {r.verified}", flush=True)
        one, many = entry["1gpu"], entry[f"{g}gpu"]
        names = sorted({n for lab in one["phases"].values() for n in lab})
        print(f"    phase        1 GPU s   {g} GPUs s (max over devices)   scaling")
        for n in names:
            a = sum(lab.get(n, 0.0) for k, lab in one["phases"].items() if k.startswith("cuda:"))
            b = max((lab.get(n, 0.0) for k, lab in many["phases"].items() if k.startswith("cuda:")), default=0.0)
            if a == 0.0:
                a = one["phases"].get("host", {}).get(n, 0.0)
                b = many["phases"].get("host", {}).get(n, 0.0)
            print(f"    {n:<12} {a:8.3f}   {b:8.3f}   {a / b if b else float('nan'):5.2f}x")
        entry["scaling_wall"] = one["wall_s"] / many["wall_s"]
        RESULTS["multi"][logn] = entry
        ok = all(one["verified"]) and all(many["verified"])
        row(f"multi 2^{logn} x{g} circuits", f"1 GPU {one['wall_s']:.2f} s, {g} GPUs {many['wall_s']:.2f} s, "
            f"{entry['scaling_wall']:.2f}x, verified={ok}")
        (OUT / "gpu_all.json").write_text(json.dumps(RESULTS, indent=1, default=str))


# -- 8. prover (issue 13/17 measures) and 9. cupti -------------------------------------------
def prover_bench(logn: int, keys: Path, batch: int, gpus: int) -> None:
    """``benchmarks/bench_prover_gpu.py``: before/after proof, batch throughput on 1 and N GPUs, CUPTI share; the
    single proof and the batches once per device flow (``batch`` = the earlier flow, ``stream-sync`` = device_flow.py
    reading each MSM back, ``stream`` = the queued default). Missing keys are made on the GPU (2^20: ~3 s, not ~110 s)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_prover_gpu.py"), "--logn", str(logn), "--keys", str(keys),
           "--batch", str(batch), "--gpus", str(gpus), "--flows", "batch,stream-sync,stream", "--keygen", "device"]
    rc = subprocess.run(cmd, cwd=ROOT, timeout=330).returncode
    res = json.loads((OUT / "bench_prover_gpu.json").read_text())
    RESULTS["prover"] = res
    if rc:
        raise RuntimeError(f"bench_prover_gpu.py exited {rc}")
    if "before" in res:
        row(f"2^{logn} proof, host paths (before)", f"{res['before']['wall_s']:.2f} s")
    for flow, got in res.get("by_flow", {}).items():
        if "after" in got:
            row(f"2^{logn} proof, device paths [{flow}]", f"{got['after']['median_wall_s']:.3f} s (median)", "<= 1.5 s")
        if "batch_1gpu" in got:
            row(f"batch {batch} x 2^{logn}, 1 GPU [{flow}]", f"{got['batch_1gpu']['proofs_per_s']:.2f} proofs/s", ">= 2")
        if f"batch_{gpus}gpu" in got:
            m = got[f"batch_{gpus}gpu"]
            row(f"batch {batch} x 2^{logn}, {gpus} GPUs [{flow}]", f"{m['proofs_per_s']:.2f} proofs/s, "
                f"{m['scaling']:.2f}x (prove span {m.get('scaling_prove_span', float('nan')):.2f}x)", ">= 1.8x")
    if "cupti" in res and res["cupti"].get("share") is not None:
        row(f"2^{logn} kernel-busy share", f"{100 * res['cupti']['share']:.0f} %", ">= 70 %")


def cupti_bench(logn: int, keys: Path, repeats: int) -> None:
    """``benchmarks/bench_cupti.py proof`` (the CUPTI collection's overhead and agreement), when it exists."""
    script = ROOT / "benchmarks" / "bench_cupti.py"
    if not script.exists():
        row("cupti", "skipped: benchmarks/bench_cupti.py not present")
        return
    js = OUT / "bench_cupti.json"
    rc = subprocess.run([sys.executable, str(script), "proof", "--logn", str(logn), "--repeats", str(repeats),
                         "--keys", str(keys), "--json", str(js)], cwd=ROOT).returncode
    if js.exists():
        RESULTS["cupti"] = json.loads(js.read_text())
    row(f"cupti (bench_cupti.py proof, 2^{logn})", f"exit {rc}, details in bench_cupti.json")
    if rc:
        raise RuntimeError(f"bench_cupti.py exited {rc}")


# -- keygen: key generation on the GPU and the largest proofs (issue 13, setup/scale) -----------------------
def keygen_section(kernel_logn: int, largest: list[int], keys: Path, repeats: int) -> None:
    """``benchmarks/bench_keygen_gpu.py``: fixed-base kernels at 2^``kernel_logn`` (CUDA events), then device
    key generation + proofs at each of ``largest`` (setup phases, prove wall, peak device memory, verified)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_keygen_gpu.py"), "--keys", str(keys),
           "--repeats", str(repeats), "--deadline", str(max(0.0, DEADLINE_S - (time.perf_counter() - START)))]
    if kernel_logn:
        cmd += ["--kernel", str(kernel_logn)]
    if largest:
        cmd += ["--largest", ",".join(map(str, largest))]
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    js = OUT / "bench_keygen_gpu.json"
    res = json.loads(js.read_text()) if js.exists() else {}
    RESULTS["keygen"] = res
    for group, k in res.get("kernel", {}).items():
        row(f"fixed base {group} 2^{kernel_logn}", f"{k['kernel_ms']:.1f} ms ({k['ns_per_point']:.1f} ns/point)")
    for logn, e in res.get("largest", {}).items():
        if e.get("runs"):
            first = e["runs"][0]
            row(f"largest 2^{logn}: keygen / prove", f"{first['setup_s']:.1f} s / {first['wall_s']:.2f} s cold, "
                f"{e.get('median_cached_wall_s') or float('nan'):.2f} s cached, verified="
                f"{all(all(x['verified']) for x in e['runs'])}", "2^24 verifies" if logn == "24" else "")
    if rc:
        raise RuntimeError(f"bench_keygen_gpu.py exited {rc}")


def seed_story_section(logn: int, batch: int, deadline_s: float) -> None:
    """The seed's story on this GPU (examples/seed_story/gpu_story.sh): the factorial ``ab`` over the five GPU
    regression switches and the null control, time-boxed to ``deadline_s`` (and the run's --deadline), then the
    per-round replicate counts. Rows: measured runs, the all-vs-none line and each switch's tally."""
    left = DEADLINE_S - (time.perf_counter() - START)
    box = max(60.0, min(deadline_s, left - 30.0)) if left != float("inf") else deadline_s
    out = OUT / "seed_story"
    r = subprocess.run(["bash", str(ROOT / "examples" / "seed_story" / "gpu_story.sh"), str(out), str(logn), str(batch),
                        str(int(box))], capture_output=True, text=True)
    print(r.stdout[-6000:], r.stderr[-2000:], flush=True)
    RESULTS["seed_story"] = {"rc": r.returncode, "logn": logn, "batch": batch, "deadline_s": box}
    rep = out / "replicates.json"
    if rep.exists():
        doc = json.loads(rep.read_text())
        RESULTS["seed_story"]["replicates"] = doc
        row(f"seed story 2^{logn} x{batch}: rounds", str(doc["rounds"]))
        for t in doc["switches"]:
            row(f"  {t['switch']}: found / called / rounds", f"{t['found']} / {t['called']} / {t['rounds']}")
    else:
        row(f"seed story 2^{logn} x{batch}", f"no replicates (rc {r.returncode})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller test sizes and fewer repeats")
    ap.add_argument("--ntt", default="20,22,24")
    ap.add_argument("--msm", default="16,20,24")
    ap.add_argument("--h2d", default="64,256,1024,4096", help="MiB sizes")
    ap.add_argument("--proof", default="16", help="log2 constraint counts for whole proofs ('' to skip)")
    ap.add_argument("--keys", default=str(ROOT / ".gpukeys"), help="proving-key cache directory")
    ap.add_argument("--no-cpu-proof", action="store_true")
    ap.add_argument("--warmup", type=int, default=1, help="untimed CUDA proofs before the first proof size")
    ap.add_argument("--no-tracer-bench", action="store_true", help="skip benchmarks/bench_tracer.py --cuda")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: build,tests,ntt,msm,h2d,proof,multi,"
                    "prover,cupti,seed")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--multi", default="", help="log2 constraint counts for the multi-GPU section ('' to skip)")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs for the multi-GPU section (default: all visible)")
    ap.add_argument("--prover", type=int, default=0, help="log2 size for bench_prover_gpu.py (0: skip)")
    ap.add_argument("--prover-batch", type=int, default=8, help="circuits of the prover section's batch runs")
    ap.add_argument("--inline-variant", action="store_true", help="MSM section: also the inlined-Fq build")
    ap.add_argument("--msm-ab", action="store_true", help="MSM section: the engines of MSM_VARIANTS side by side")
    ap.add_argument("--msm-cupti", action="store_true", help="MSM section: per-kernel CUPTI time of each engine")
    ap.add_argument("--msm-windows", default="", help="MSM section: extra windows to sweep at the largest size")
    ap.add_argument("--deadline", type=float, default=float("inf"),
                    help="seconds after which no further section starts (the summary still prints)")
    ap.add_argument("--msm-g2", default="16,20", help="log2 sizes of the G2 MSM rows ('' to skip)")
    ap.add_argument("--cupti-logn", type=int, default=18, help="proof size for bench_cupti.py proof")
    ap.add_argument("--cupti-repeats", type=int, default=2)
    ap.add_argument("--keygen-kernel", type=int, default=0, help="log2 points for the fixed-base kernel timing (0: skip)")
    ap.add_argument("--seed-story", type=int, default=0, help="log2 size of the seed story's factorial (0: skip; 22)")
    ap.add_argument("--seed-batch", type=int, default=4, help="circuits per run of the seed story")
    ap.add_argument("--seed-deadline", type=float, default=420, help="seconds the seed story's runs may take")
    ap.add_argument("--largest", default="", help="log2 sizes: device keygen + proof on one GPU ('' to skip; 22,24)")
    a = ap.parse_args()
    global INLINE_VARIANT, DEADLINE_S, MSM_AB, MSM_CUPTI, MSM_WINDOWS
    INLINE_VARIANT = a.inline_variant
    MSM_AB, MSM_CUPTI, MSM_WINDOWS = a.msm_ab, a.msm_cupti, a.msm_windows
    DEADLINE_S = a.deadline
    skip = set(filter(None, a.skip.split(",")))
    ints = lambda s: [int(x) for x in s.split(",") if x.strip()]  # noqa: E731
    if "build" not in skip:
        section("build", build)
    if "tests" not in skip:
        section("tests", tests, a.quick, not a.no_tracer_bench, Path(a.keys))
    if "prover" not in skip and a.prover:
        section("prover", prover_bench, a.prover, Path(a.keys), a.prover_batch, a.gpus or 2)
    if "ntt" not in skip:
        section("ntt", ntt_bench, ints(a.ntt), a.repeats)
    if "msm" not in skip:
        section("msm", msm_bench, ints(a.msm), max(3, a.repeats // 2))
    if "msm" not in skip and a.msm_g2:
        section("msm_g2", g2_bench, ints(a.msm_g2), max(3, a.repeats // 2))
    if "h2d" not in skip:
        section("h2d", h2d_bench, ints(a.h2d))
    if "proof" not in skip and a.proof:
        section("proof", proof_bench, ints(a.proof), Path(a.keys), not a.no_cpu_proof, a.warmup)
    if "multi" not in skip and a.multi:
        section("multi", multi_bench, ints(a.multi), Path(a.keys), a.gpus)
    if "keygen" not in skip and (a.keygen_kernel or a.largest):
        section("keygen", keygen_section, a.keygen_kernel, ints(a.largest), Path("/tmp/gk-largest"), 2)
    if "cupti" not in skip:
        section("cupti", cupti_bench, a.cupti_logn, Path(a.keys), a.cupti_repeats)
    if "seed" not in skip and a.seed_story:
        section("seed", seed_story_section, a.seed_story, a.seed_batch, a.seed_deadline)
    (OUT / "gpu_all.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    dev = RESULTS.get("device", {})
    print(f"\n== summary ({RESULTS['date']}, {dev.get('name', '?')}, {dev.get('sms', '?')} SMs) ==")
    for item, value, target in TABLE:
        print(f"{item:<34} {value:<52} {target}")
    return 1 if RESULTS.get("errors") or RESULTS.get("pytest", {}).get("rc", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
