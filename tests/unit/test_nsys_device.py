"""The docs/nsight.md recipe for real: `nsys profile -t cuda,nvtx --capture-range=nvtx
--nvtx-capture=prove@gputrace --capture-range-end=stop` on a small prover-shaped CuPy workload, exported to SQLite and read
with read_nsys. Needs a GPU, CuPy and an nsys CLI (PATH, $GPUTRACE_NSYS, or the copy Nsight Compute
ships under /opt/nvidia/nsight-compute/*/host/target-linux-x64/); skipped otherwise.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from gputrace.timeline.formats.nsys.read import read_nsys

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = textwrap.dedent("""
    import time
    import cupy as cp
    import cupyx
    import numpy as np
    import gputrace

    n = 1 << 22
    s = cp.cuda.Stream(non_blocking=True)
    for b in range(2):
        with gputrace.phase("prove", batch=b):
            with gputrace.phase("synthesis"):
                host = np.random.default_rng(b).random(n, dtype=np.float32)
            with gputrace.phase("pin", bytes=host.nbytes):
                pinned = cupyx.empty_pinned(n, dtype=np.float32)
                pinned[:] = host
            with gputrace.phase("h2d", device=0, bytes=host.nbytes):
                with s:
                    d = cp.empty(n, dtype=cp.float32)
                    d.set(pinned, stream=s)
                d2 = cp.asarray(host)  # pageable
            with gputrace.phase("ntt", device=0):
                with s:
                    for _ in range(3):
                        d = cp.fft.fft(d.reshape(-1, 1024)).real.astype(cp.float32).reshape(-1)
            with gputrace.phase("msm_h", device=0):
                e = float((d * 2 + d2).sum())
            with gputrace.phase("d2h", device=0):
                out = cp.asnumpy(d)
            with gputrace.phase("sync"):
                cp.cuda.Device(0).synchronize()
    print("ok", e)
""")


def find_nsys() -> str | None:
    cands = [os.environ.get("GPUTRACE_NSYS"), shutil.which("nsys")]
    cands += sorted(glob.glob("/opt/nvidia/nsight-systems/*/bin/nsys"), reverse=True)
    cands += sorted(glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"), reverse=True)
    return next((c for c in cands if c and os.access(c, os.X_OK)), None)


def _importer_for(nsys: str) -> str | None:
    # The CLI that Nsight Compute ships converts .qdstrm to .nsys-rep with a host-side importer.
    base = Path(nsys).resolve().parent.parent
    hits = sorted(base.glob("*/QdstrmImporter"))
    return str(hits[0]) if hits else None


@pytest.mark.gpu
@pytest.mark.slow
def test_recipe_on_a_real_gpu(tmp_path):
    nsys = find_nsys()
    if nsys is None:
        pytest.skip("no nsys CLI on this machine")
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    rep = tmp_path / "prove"
    cmd = [nsys, "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none", "--capture-range=nvtx",
           "--nvtx-capture=prove@gputrace", "--capture-range-end=stop", "-o", str(rep), "--force-overwrite=true", sys.executable, str(script)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    # --capture-range-end=stop: profiling stops after the first prove, the program runs to the end.
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    nsys_rep = rep.with_suffix(".nsys-rep")
    if not nsys_rep.exists():
        qd = rep.with_suffix(".qdstrm")
        imp = _importer_for(nsys)
        if not (qd.exists() and imp):
            pytest.skip(f"nsys wrote no report: {r.stdout[-300:]} {r.stderr[-300:]}")
        ri = subprocess.run([imp, "-i", str(qd)], capture_output=True, text=True, timeout=300,
                            env={**env, "LD_LIBRARY_PATH": os.environ.get("GPUTRACE_NSYS_LIBS", "")})
        if not nsys_rep.exists():
            pytest.skip(f"QdstrmImporter could not run here: {ri.stderr[-300:]}")
    sqlite = tmp_path / "prove.sqlite"
    subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(sqlite), str(nsys_rep)],
                   check=True, capture_output=True, timeout=300)
    tl = read_nsys(sqlite)
    ours = Counter(tl.name_of(r) for r in range(tl.n) if tl.attrs.get(r, {}).get("nvtx.domain") == "gputrace")
    # --capture-range=nvtx --nvtx-capture=prove@gputrace: exactly the first prove and its phases.
    assert ours == Counter({"prove": 1, "synthesis": 1, "pin": 1, "h2d": 1, "ntt": 1, "msm_h": 1, "d2h": 1, "sync": 1})
    rows = {tl.name_of(r): r for r in range(tl.n)}
    assert tl.path(rows["ntt"]) == "prove/ntt" and tl.lanes[tl.lane[rows["ntt"]]].device == 0
    assert tl.nbytes[rows["h2d"]] == (1 << 22) * 4
    gpu = [r for r in range(tl.n) if tl.gpu_start[r] >= 0]
    assert gpu and all(tl.lanes[tl.lane[r]].device == 0 for r in gpu)
    parents = Counter(tl.name_of(int(tl.parent[r])) for r in gpu if tl.parent[r] >= 0)
    assert parents["ntt"] >= 3 and parents["h2d"] >= 2, parents  # kernels/copies under their phase
    kinds = {tl.attrs[r].get("cuda.memcpy.src_kind") for r in gpu if "cuda.memcpy.kind" in tl.attrs.get(r, {})}
    assert {"PINNED", "PAGEABLE"} <= kinds, kinds
