"""analysis/collectives.py: ranks from resources, NCCL kernels as communication, overlap with compute,
collectives matched across ranks, and the straggler (on the committed 2-rank gloo fixture and on
synthetic Kineto traces with NCCL kernels)."""

from __future__ import annotations

import json
from pathlib import Path

from gputrace.analysis.collectives import collectives, is_comm_kernel, rank_of
from gputrace.analysis.report import analyse_timeline
from gputrace.timeline.load import read_any

DATA = Path(__file__).resolve().parents[1] / "data" / "foreign"
MS = 1_000_000


def test_names_and_ranks():
    assert is_comm_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert is_comm_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t") and not is_comm_kernel("void gemm<1>(float*)")
    assert rank_of({"gputrace.rank": 3}) == 3 and rank_of({"distributedInfo.rank": 1}) == 1
    assert rank_of({"rank": "2"}) == 2 and rank_of({"host.name": "a"}) is None


def test_gloo_fixture_names_rank_1_and_its_wait():
    """Rank 1 sleeps 50 ms before each all_reduce: it is the straggler, and rank 0 waits about 50 ms each time."""
    tl = read_any([DATA / "dist_rank0.json.gz", DATA / "dist_rank1.json.gz"])
    c = collectives(tl)
    assert [r["rank"] for r in c["ranks"]] == [0, 1] and c["matched"] == 5
    top = c["stragglers"][0]
    assert top["rank"] == 1 and top["last"] == 4
    assert abs(top["median_wait_ns"] - 50 * MS) <= 0.1 * 50 * MS, top
    found = analyse_timeline(tl).to_dict()["findings"]
    assert any(f["rule"] == "straggler" and f["where"] == "rank 1" for f in found)


def test_one_rank_reports_nothing():
    tl = read_any([DATA / "dist_rank0.json.gz"])
    c = collectives(tl)
    assert c["collectives"] == [] and c["stragglers"] == [] and [r["rank"] for r in c["ranks"]] == [0]
    assert collectives(read_any([DATA / "train_kineto.json.gz"])) == {"ranks": [], "collectives": [], "stragglers": []}


def _kineto(path: Path, rank: int, kernels: list[tuple[str, float, float]]) -> Path:
    ev = [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
           "args": {"device": 0, "stream": 7 if not n.startswith("nccl") else 9, "correlation": i + 1}}
          for i, (n, ts, dur) in enumerate(kernels)]
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
           "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return path


def test_nccl_kernels_overlap_exposure_and_arrival(tmp_path):
    ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    # rank 0: compute 0-10 ms, all-reduce 5-15 ms (half hidden); rank 1: compute 0-30 ms, all-reduce 30-35 ms.
    r0 = _kineto(tmp_path / "r0.json", 0, [("void gemm<1>(float*)", 0, 10_000), (ar, 5_000, 10_000)])
    r1 = _kineto(tmp_path / "r1.json", 1, [("void gemm<1>(float*)", 0, 30_000), (ar, 30_000, 5_000)])
    c = collectives(read_any([r0, r1]))
    by = {r["rank"]: r for r in c["ranks"]}
    assert by[0]["source"] == "nccl kernels" and by[0]["comm_ns"] == 10 * MS
    assert by[0]["overlap_ns"] == 5 * MS and by[0]["exposed_ns"] == 5 * MS
    assert by[1]["overlap_ns"] == 0 and by[1]["exposed_ns"] == 5 * MS
    [m] = c["collectives"]
    assert m["last_rank"] == 1 and m["waits"] == {"0": 25 * MS}


def _otlp_rank(rank: int, pid: int, spans: list[tuple[str, int, int]]) -> str:
    """One line of a ``gputrace record`` trace: a process with ``gputrace.rank`` and host spans (name, start,
    end in ms after a base), all children of the process's root span."""
    base = 1_700_000_000_000_000_000

    def attr(k: str, v: object) -> dict:
        return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}

    root = {"traceId": "ab" * 16, "spanId": f"{pid:016x}", "name": "python job.py", "kind": 1,
            "startTimeUnixNano": str(base), "endTimeUnixNano": str(base + 1000 * MS), "attributes": []}
    out = [root] + [{"traceId": "ab" * 16, "spanId": f"{pid:08x}{i:08x}", "parentSpanId": f"{pid:016x}",
                     "name": n, "kind": 1, "startTimeUnixNano": str(base + s * MS),
                     "endTimeUnixNano": str(base + e * MS), "attributes": [attr("gputrace.kind", "host")]}
                    for i, (n, s, e) in enumerate(spans, 1)]
    res = {"attributes": [attr("service.name", "python job.py"), attr("host.name", "h"), attr("process.pid", pid),
                          attr("gputrace.rank", rank), attr("gputrace.world_size", 2)]}
    return json.dumps({"resourceSpans": [{"resource": res, "scopeSpans": [{"scope": {"name": "gputrace"},
                                                                            "spans": out}]}]})


def test_named_host_ranges_are_collectives(tmp_path):
    """A recorded gloo job (no c10d:: or NCCL rows): each rank's own ``all_reduce`` ranges are its collectives;
    rank 1 arrives 50 ms late at 3 of them (30 ms at the fourth), so it is the straggler with a 50 ms median
    wait. A non-collective range (``compute``) is not communication."""
    r0, r1 = [], []
    for i, late in enumerate((50, 50, 30, 50)):
        t = 100 * i
        r0 += [("compute", t, t + 5), ("all_reduce", t + 5, t + 6 + late)]
        r1 += [("compute", t, t + 5), ("all_reduce", t + 5 + late, t + 6 + late)]
    p = tmp_path / "ddp.jsonl"
    p.write_text(_otlp_rank(0, 100, r0) + "\n" + _otlp_rank(1, 101, r1) + "\n")
    tl = read_any([p])
    c = collectives(tl)
    by = {r["rank"]: r for r in c["ranks"]}
    assert by[0]["calls"] == 4 and by[1]["calls"] == 4 and by[0]["source"] == "host calls"
    assert by[0]["comm_ns"] == (51 * 3 + 31) * MS and by[1]["comm_ns"] == 4 * MS
    assert c["matched"] == 4 and {m["name"] for m in c["collectives"]} == {"all_reduce"}
    [top] = c["stragglers"]
    assert top["rank"] == 1 and top["last"] == 4 and top["median_wait_ns"] == 50 * MS
    assert top["caused_ns"] == 180 * MS
    found = analyse_timeline(tl).to_dict()["findings"]
    assert any(f["rule"] == "straggler" and f["where"] == "rank 1" for f in found)


def test_named_ranges_defer_to_c10d_calls(tmp_path):
    """Where a rank has both ``c10d::allreduce_`` and an ``all_reduce`` range around it, only the calls count
    (one collective each, not two); a range merely containing the word (``all_reduce_prep``) is not one."""
    spans = [("all_reduce", 10, 20), ("c10d::allreduce_", 11, 19), ("all_reduce_prep", 0, 9)]
    p = tmp_path / "two.jsonl"
    p.write_text(_otlp_rank(0, 100, spans) + "\n" + _otlp_rank(1, 101, spans) + "\n")
    c = collectives(read_any([p]))
    assert [r["calls"] for r in c["ranks"]] == [1, 1] and c["matched"] == 1
    assert c["collectives"][0]["name"] == "c10d::allreduce_"
