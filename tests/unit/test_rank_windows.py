"""Per-rank profiler traces read together (``report rank0.json rank1.json``) cover different windows: each
rank's GPU idle and busy window end where its own host's recording does (``_common.host_run_extents``), so a
rank whose profiler started 5 ms later is not 5 ms idle before it."""

from __future__ import annotations

import json

from gputrace.commands.report import analyse
from gputrace.timeline import read_any

MS = 1_000_000


def _rank(tmp_path, rank: int, t0_us: float):
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": t0_us,
           "dur": 10000.0}]
    for i in range(8):  # 8 kernels of 0.9 ms, one a millisecond from 1 ms into the window
        t = t0_us + 1000 + i * 1000
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t,
                   "dur": 5.0, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 10, "dur": 900.0,
                   "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    p = tmp_path / f"rank{rank}.json"
    p.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
                             "traceEvents": ev}))
    return p


def test_each_rank_is_idle_only_inside_its_own_window(tmp_path):
    d = analyse(read_any([_rank(tmp_path, 0, 1000.0), _rank(tmp_path, 1, 6000.0)]))
    devs = {x["host"]: x for x in d["gpu_activity"]["devices"]}
    assert set(devs) == {"rank0", "rank1"}
    for x in devs.values():  # 10 ms windows, 7.2 ms busy each: not the 15 ms the two windows span together
        assert (x["window_ns"], x["busy_ns"], x["idle_ns"]) == (10 * MS, 7_200_000, 2_800_000)
    edges = sorted(s["lost_ns"] for s in d["stalls"] if s["category"] == "idle" and "ing)" in s["text"])
    assert edges and max(edges) < 1_200_000  # leading 1.01 ms and trailing 1.09 ms, not 6 ms
