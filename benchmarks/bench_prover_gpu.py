#!/usr/bin/env python3
"""Issue 13/17 measures for the GPU prover, every proof verified (device machine only).

    python3 benchmarks/bench_prover_gpu.py --logn 20 --keys /tmp/gk [--batch 8] [--repeats 3] [--gpus 2]
        [--flows batch,stream] [--keygen auto]

Runs, in one process, keys cached in ``--keys`` (generated on first use):
1. ``before``: one proof with the host paths (``synthesis="host"``, ``b_g2="host"``: R1CS synthesis in
   processes, the G2 MSM on the CPU pool), the pipeline as it was before device synthesis;
2. ``after``: one proof with the device paths (``auto``), ``--repeats`` times, median wall;
3. ``batch``: ``--batch`` circuits on one GPU (proofs/s), then the same count split over ``--gpus`` GPUs
   (``--batch / gpus`` each): throughput and the scaling;
   2 and 3 run once per device flow in ``--flows`` (``ProveOptions.device_flow``: ``batch`` = the earlier flow,
   ``stream`` = witnesses on a second stream, tails on the device, keys loaded inside ``prove``, MSM results left on
   the device until one copy back per circuit; ``stream-sync`` = the same with a host point after every MSM), the
   warm-up (a 2^14 proof per flow, on one GPU and on ``--gpus``: every device's modules and kernels loaded), the single
   proofs' repeats interleaved across the flows; ``after``/``batch_*`` hold the last flow, ``by_flow`` every one,
   with the trace's start-up (``prove`` root to the first ``msm_h`` on the device) and ``synthesis`` brackets;
4. ``cupti``: one device-path proof with CUDA activity (CUPTI), and per top-level GPU phase the share of its
   wall time in which a kernel ran (``analysis.gpu_activity.launch_gaps``).
Writes ``$OUT/bench_prover_gpu.json`` and traces ``$OUT/prover-2_N-*.jsonl``; prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT") or ROOT / "gpu-out")
OUT.mkdir(parents=True, exist_ok=True)
TOP_GPU_PHASES = ("synthesis", "h2d", "ntt", "msm_h", "batch_add", "msm_l", "msm_a", "msm_b_g1", "b_g2")


def prove(logn: int, keys: Path, tmp: Path, *, batch: int = 1, devices: int = 1, trace: Path | None = None,
          **kw) -> dict:
    from gputrace.prover.options import OPT_NAMES, ProveOptions
    from gputrace.prover.pipeline import run_prove

    out = Path(tempfile.mkdtemp(dir=tmp))
    o = ProveOptions(constraints=1 << logn, batch=batch, devices=devices, backend="cuda", opts=frozenset(OPT_NAMES),
                     out_dir=out, key_dir=keys, trace=trace, **kw)
    r = run_prove(o)
    shutil.rmtree(out, ignore_errors=True)
    phases: dict[str, float] = {}
    per_device: dict[str, dict[str, float]] = {}
    for (name, label), sec in r.phase_seconds.items():  # host-clock brackets (perf_counter), summed
        phases[name] = phases.get(name, 0.0) + sec
        per_device.setdefault(label, {})[name] = sec
    if not all(r.verified) or len(r.verified) != batch * devices:
        raise RuntimeError(f"2^{logn} batch {batch} x {devices}: verified {r.verified}")
    out = dict(wall_s=r.wall_s, setup_s=r.setup_s, proofs=len(r.verified), verified=all(r.verified),
               config={k: r.config.get(k) for k in ("synthesis", "b_g2", "device_flow")}, phases=phases,
               per_device=per_device)
    if trace is not None and not os.environ.get("GPUTRACE_CUDA_ACTIVITY"):
        out["gpu_idle_after_start"] = idle_after_start(trace)
        out["prove_span_s"] = prove_span_s(trace)  # the prove root (the batch flow loads the keys before it)
        out["start_up"] = start_up(trace)
    return out


def visible_gpus() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def prove_span_s(trace: Path) -> float:
    import numpy as np

    from gputrace.timeline import read_trace

    tl = read_trace(trace)
    m = np.array([tl.name_of(i) == "prove" for i in range(tl.n)])
    return float((tl.cols["end"][m] - tl.cols["start"][m]).max()) / 1e9


def start_up(trace: Path) -> dict:
    """From the trace, per device: ms from the ``prove`` root's start to the device start of its first ``msm_h``
    (plans, witness, NTT and key upload before the first MSM), and the ``synthesis`` phases' host-clock and
    CUDA-event brackets summed (ms). Host wall of the root is the reference clock of the first figure."""
    import numpy as np

    from gputrace.timeline import read_trace

    tl = read_trace(trace)
    c = tl.cols
    names = np.array([tl.name_of(i) for i in range(tl.n)])
    p0 = int(c["start"][names == "prove"].min())
    out = {}
    for dev in sorted({int(d) for d in c["device"] if d >= 0}):
        on = c["device"] == dev
        mh = on & (names == "msm_h") & (c["gpu_start"] > 0)
        sy = on & (names == "synthesis")
        sy_gpu = sy & (c["gpu_start"] > 0)
        out[dev] = dict(
            first_msm_h_ms=(int(c["gpu_start"][mh].min()) - p0) / 1e6 if mh.any() else None,
            synthesis_host_ms=float((c["end"][sy] - c["start"][sy]).sum()) / 1e6,
            synthesis_gpu_ms=float((c["gpu_end"][sy_gpu] - c["gpu_start"][sy_gpu]).sum()) / 1e6,
            synthesis_chunks=int(sy.sum()))
    return out


def idle_after_start(trace: Path) -> dict:
    """Per device: from its first GPU phase's device start to the end of ``prove``, the share of time no
    top-level GPU phase's CUDA-event bracket covers (brackets include launch gaps, so this idle share is a
    lower bound; issue 17 asks for at most 10 %)."""
    import numpy as np

    from gputrace.timeline import read_trace

    tl = read_trace(trace)
    c = tl.cols
    names = np.array([tl.name_of(i) for i in range(tl.n)])
    p_end = int(c["end"][names == "prove"].max())
    out = {}
    for dev in sorted({int(d) for d in c["device"] if d >= 0}):
        m = (c["device"] == dev) & np.isin(names, TOP_GPU_PHASES) & (c["gpu_start"] > 0)
        order = np.argsort(c["gpu_start"][m])
        busy, cs, ce = 0, None, None
        for a, b in zip(c["gpu_start"][m][order].tolist(), c["gpu_end"][m][order].tolist()):
            if ce is None or a > ce:
                busy += 0 if ce is None else ce - cs
                cs, ce = a, b
            else:
                ce = max(ce, b)
        if ce is None:
            continue
        busy += ce - cs
        win = p_end - int(c["gpu_start"][m][order][0])
        out[dev] = dict(window_ms=win / 1e6, busy_ms=busy / 1e6, idle_share=1 - busy / win)
    return out


def kernel_share(trace: Path) -> dict:
    """Per top-level GPU phase: host-time bracket, kernel-busy union and their ratio (CUPTI activity)."""
    from gputrace.analysis.gpu_activity import launch_gaps
    from gputrace.timeline import read_trace

    tl = read_trace(trace)
    rows = [d for d in launch_gaps(tl).by_phase() if d["phase"] in TOP_GPU_PHASES]
    br = sum(d["bracket_ns"] for d in rows)
    kn = sum(d["kernel_ns"] for d in rows)
    per = {d["phase"]: dict(bracket_ms=d["bracket_ns"] / 1e6, kernel_ms=d["kernel_ns"] / 1e6,
                            busy_ms=d["busy_ns"] / 1e6, kernels=d["kernels"],
                            share=d["kernel_ns"] / d["bracket_ns"] if d["bracket_ns"] else None) for d in rows}
    return dict(bracket_ms=br / 1e6, kernel_ms=kn / 1e6, share=kn / br if br else None, phases=per,
                device_window=kernel_window_share(tl))


def kernel_window_share(tl) -> dict:
    """Per device: the union of its kernels (CUPTI) over the window from its first kernel's start to its last
    kernel's end. The phase-bracket share above uses host brackets while CUPTI collects (the recorder skips the
    per-phase CUDA events then), which in the queued stream flow are the time to queue a phase, not to run it, so
    it can exceed 100 %; this share holds for every flow."""
    from gputrace.analysis.activity_index import KERNEL, activity_index

    idx = activity_index(tl)
    out = {}
    for dev in sorted({int(d) for d in idx.device if d >= 0}):
        m = (idx.device == dev) & (idx.what == KERNEL)
        if not m.any():
            continue
        st, en = idx.start[m], idx.end[m]
        order = st.argsort(kind="stable")
        busy, cs, ce = 0, None, None
        for a, b in zip(st[order].tolist(), en[order].tolist()):
            if ce is None or a > ce:
                busy += 0 if ce is None else ce - cs
                cs, ce = a, b
            else:
                ce = max(ce, b)
        busy += ce - cs
        win = int(en.max()) - int(st.min())
        out[dev] = dict(kernel_ms=busy / 1e6, window_ms=win / 1e6, share=busy / win if win else None)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logn", type=int, default=20)
    ap.add_argument("--keys", default="/tmp/gk")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma list: before,after,batch,multi,cupti")
    ap.add_argument("--flows", default="batch,stream", help="device flows to compare (ProveOptions.device_flow)")
    ap.add_argument("--keygen", default="host", help="where missing keys are made: host, device or auto")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    flows = [f for f in a.flows.split(",") if f]
    keys = Path(a.keys)
    tmp = Path(tempfile.mkdtemp(prefix="gputrace-bpg-"))
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
                 "by_flow": {f: {} for f in flows}}
    table: list[tuple[str, str]] = []
    n = a.logn
    kg = dict(keygen=a.keygen)

    def save() -> None:
        (OUT / "bench_prover_gpu.json").write_text(json.dumps(res, indent=1, default=str))

    def tag(flow: str) -> str:
        return "" if len(flows) == 1 else f" [{flow}]"

    try:
        t = time.perf_counter()
        for flow in flows:  # warm-up of each flow: modules, CuPy's reduction kernels, pools (and small keys)
            prove(min(n, 14), keys, tmp, device_flow=flow, **kg)
            if "multi" not in skip and 1 < a.gpus <= visible_gpus():  # every GPU the 2-GPU run uses, not GPU 0 only
                prove(min(n, 14), keys, tmp, devices=a.gpus, device_flow=flow, **kg)
        res["warmup_s"] = time.perf_counter() - t
        if "before" not in skip:
            res["before"] = prove(n, keys, tmp, synthesis="host", b_g2="host", trace=OUT / f"prover-2_{n}-before.jsonl",
                                  **kg)
            table.append((f"2^{n} proof, host paths (before)", f"{res['before']['wall_s']:.2f} s"))
            save()
        if "after" not in skip:
            runs: dict[str, list] = {f: [] for f in flows}
            for i in range(a.repeats):  # interleaved: drift of the machine hits every flow alike
                for flow in flows:
                    tr = OUT / f"prover-2_{n}-after-{flow}.jsonl" if i == 0 else None
                    runs[flow].append(prove(n, keys, tmp, trace=tr, device_flow=flow, **kg))
            for flow in flows:
                rs = runs[flow]
                res["by_flow"][flow]["after"] = res["after"] = dict(
                    runs=rs, median_wall_s=statistics.median(r["wall_s"] for r in rs))
                walls = ", ".join(f"{r['wall_s']:.3f}" for r in rs)
                table.append((f"2^{n} proof, device paths{tag(flow)}",
                               f"median {res['after']['median_wall_s']:.3f} s of {walls}"))
            save()
        if "batch" not in skip:
            for flow in flows:
                one = prove(n, keys, tmp, batch=a.batch, device_flow=flow,
                            trace=OUT / f"prover-2_{n}-batch{a.batch}-1gpu-{flow}.jsonl", **kg)
                one["proofs_per_s"] = one["proofs"] / one["wall_s"]
                res["by_flow"][flow]["batch_1gpu"] = res["batch_1gpu"] = one
                su = one.get("start_up", {}).get(0, {})
                idle = one.get("gpu_idle_after_start", {}).get(0, {})
                table.append((f"batch {a.batch} x 2^{n}, 1 GPU{tag(flow)}", f"{one['wall_s']:.2f} s, "
                              f"{one['proofs_per_s']:.2f} proofs/s (prove span {one['prove_span_s']:.2f} s)"))
                table.append(("  start-up, synthesis, GPU idle",
                              f"first msm_h at {su.get('first_msm_h_ms') or 0:.0f} ms; "
                              f"synthesis host {su.get('synthesis_host_ms', 0):.1f} / device "
                              f"{su.get('synthesis_gpu_ms', 0):.1f} ms in {su.get('synthesis_chunks', 0)} chunk(s); "
                              f"idle {100 * idle.get('idle_share', 0):.1f} %"))
                save()
                if "multi" not in skip and a.gpus > 1 and a.batch % a.gpus == 0 and a.gpus > visible_gpus():
                    table.append((f"batch {a.batch} x 2^{n}, {a.gpus} GPUs{tag(flow)}",
                                  f"not run: {visible_gpus()} GPU(s) visible"))
                elif "multi" not in skip and a.gpus > 1 and a.batch % a.gpus == 0:
                    many = prove(n, keys, tmp, batch=a.batch // a.gpus, devices=a.gpus, device_flow=flow,
                                 trace=OUT / f"prover-2_{n}-batch{a.batch}-{a.gpus}gpu-{flow}.jsonl", **kg)
                    many["proofs_per_s"] = many["proofs"] / many["wall_s"]
                    many["scaling"] = many["proofs_per_s"] / one["proofs_per_s"]
                    many["scaling_prove_span"] = one["prove_span_s"] / many["prove_span_s"]
                    res["by_flow"][flow][f"batch_{a.gpus}gpu"] = res[f"batch_{a.gpus}gpu"] = many
                    table.append((f"batch {a.batch} x 2^{n}, {a.gpus} GPUs{tag(flow)}", f"{many['wall_s']:.2f} s, "
                                  f"{many['proofs_per_s']:.2f} proofs/s, {many['scaling']:.2f}x of 1 GPU (prove span "
                                  f"{many['prove_span_s']:.2f} s, {many['scaling_prove_span']:.2f}x)"))
                    idle = many.get("gpu_idle_after_start", {})
                    table.append((f"  GPU idle after first start ({a.gpus} GPUs)",
                                  ", ".join(f"GPU {d}: {100 * v['idle_share']:.1f} %" for d, v in idle.items())))
                    one_dev = one["per_device"].get("cuda:0", {})
                    scal = {}
                    for ph, sec in one_dev.items():
                        worst = max(v.get(ph, 0.0) for k, v in many["per_device"].items() if k.startswith("cuda:"))
                        if worst > 0:
                            scal[ph] = sec / worst
                    many["phase_scaling"] = scal
                    table.append(("  1 -> N GPU scaling per phase",
                                  ", ".join(f"{k} {v:.2f}x" for k, v in sorted(scal.items()))))
                    for label, ph in sorted(many["per_device"].items()):
                        if label.startswith("cuda:"):
                            table.append((f"  {label} phases (s)",
                                          ", ".join(f"{k} {v:.3f}" for k, v in sorted(ph.items()))))
                    save()
        if "cupti" not in skip:
            os.environ["GPUTRACE_CUDA_ACTIVITY"] = "1"
            try:
                tr = OUT / f"prover-2_{n}-cupti.jsonl"
                res["cupti_proof"] = prove(n, keys, tmp, trace=tr, device_flow=flows[-1], **kg)
            finally:
                os.environ.pop("GPUTRACE_CUDA_ACTIVITY", None)
            ks = res["cupti"] = kernel_share(tr)
            table.append((f"2^{n} kernel-busy share of GPU phases", f"{100 * (ks['share'] or 0):.0f} % "
                          f"({ks['kernel_ms']:.0f} of {ks['bracket_ms']:.0f} ms)"))
            for dev, w in ks["device_window"].items():
                table.append((f"  GPU {dev} kernels, first to last kernel", f"{100 * (w['share'] or 0):.1f} % "
                              f"({w['kernel_ms']:.1f} of {w['window_ms']:.1f} ms)"))
            for ph, d in ks["phases"].items():
                table.append((f"  {ph}", f"{d['kernel_ms']:.1f} ms kernels / {d['bracket_ms']:.1f} ms"))
            save()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        save()
    print("\n== bench_prover_gpu ==")
    for item, value in table:
        print(f"{item:<40} {value}")
    if "before" in res:
        print("before phases: " + ", ".join(f"{p} {s:.3f}" for p, s in sorted(res["before"]["phases"].items())))
    for flow, got in res["by_flow"].items():
        for key, ph in (("batch_1gpu", got.get("batch_1gpu", {}).get("phases")),
                        ("after", got["after"]["runs"][0]["phases"] if "after" in got else None)):
            if ph:
                print(f"{key} [{flow}] phases: " + ", ".join(f"{p} {s:.3f}" for p, s in sorted(ph.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
