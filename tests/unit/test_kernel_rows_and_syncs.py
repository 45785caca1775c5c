"""Kernel rows and sync kinds: one kernel-table row per distinct kernel (template arguments that differ make two
rows, however torch.profiler or Nsight spells them), short names that tell the rows apart, per-kernel totals in
``report --json``; Nsight's syncs labelled by the call that synchronised, and polls (``cudaEventQuery``) not counted
as the host blocking (kernel_names.py, analysis/gpu_transfers.py, timeline/formats/nsys/device.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gputrace import activity as A
from gputrace.analysis.gpu_summary import gpu_summary
from gputrace.analysis.gpu_transfers import kernel_names_table, kernel_table, sync_waits
from gputrace.kernel_names import distinct_display, kernel_key
from gputrace.testing.activity_records import activity_timeline
from gputrace.timeline.load import read_any

DATA = Path(__file__).resolve().parents[1] / "data" / "foreign"
T0 = 1_767_225_600_000_000_000
US = 1_000
RED128 = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, F> >(at::native::ReduceOp<float, F>)"
RED256 = "void at::native::reduce_kernel<256, 2, at::native::ReduceOp<float, F> >(at::native::ReduceOp<float, F>)"
RED128_NSYS = "void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float, F>>(T3)"


def test_kernel_key_keeps_template_arguments_and_agrees_across_sources():
    assert kernel_key(RED128) != kernel_key(RED256)
    assert kernel_key(RED128) == kernel_key(RED128_NSYS) == "at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, F>>"
    kineto = "void k<true, 2ul>(char*, float const*)"
    nsight = "void k<(bool)1, (unsigned long)2>(T1 *, const T2 *)"
    assert kernel_key(kineto) == kernel_key(nsight) == "k<true, 2>"
    lam = "void f<4, G(int)::{lambda()#2}::operator()() const::{lambda(float)#1}>(int)"
    lam_nsys = "void f<(int)4, G(int)::[lambda() (instance 2)]::operator ()() const::[lambda(float) (instance 1)]>(int)"
    assert kernel_key(lam) == kernel_key(lam_nsys)
    assert kernel_key("sm80_xmma_gemm_f32f32_tn_n") == "sm80_xmma_gemm_f32f32_tn_n"


def test_distinct_display_tells_kernels_apart():
    shown = distinct_display([RED128, RED256, "void ntt<256>(Fr*, int)"])
    assert shown[RED128] == "reduce_kernel<128, 4, …>"
    assert shown[RED256] == "reduce_kernel<256, 2, …>"
    assert shown["void ntt<256>(Fr*, int)"] == "ntt<…>"
    assert len(set(shown.values())) == 3


def test_the_fixtures_have_one_row_per_distinct_kernel_in_both_sources():
    """torch.profiler and Nsight of one program: 25 distinct kernels each (16 short names), the same 25 keys, and
    the per-kernel totals of ``--json`` name each once."""
    keys = []
    for f in ("train_kineto.json.gz", "train_nsys.sqlite.gz"):
        tl = read_any([DATA / f])
        full = {kernel_key(a[A.KERNEL_NAME]) for a in tl.attrs.values() if a.get(A.ACTIVITY) == "kernel"}
        table = kernel_table(tl)
        names = kernel_names_table(table)
        assert len(names) == len(full) == 25 and {n["key"] for n in names} == full
        assert len({n["display"] for n in names}) == 25  # the short names shown tell them apart
        assert len({(r["phase"], r["key"], r["device"]) for r in table}) == len(table)
        assert sum(n["total_ns"] for n in names) == sum(r["total_ns"] for r in table)
        assert gpu_summary(tl)["kernel_names"] == names
        keys.append(full)
    assert keys[0] == keys[1]


def test_nsight_syncs_take_the_kind_of_their_call_and_polls_are_not_waits():
    """Nsight 2025.3 writes syncType 2 (STREAM_WAIT_EVENT in its own enum table) for each of the 24
    ``cudaStreamSynchronize`` calls and 1 (EVENT_SYNCHRONIZE) for 7 ``cudaEventQuery`` polls: the syncs are 24
    stream syncs, and the polls are plain API calls."""
    tl = read_any([DATA / "train_nsys.sqlite.gz"])
    syncs = Counter((a.get(A.SYNC_TYPE), a.get(A.API)) for a in tl.attrs.values() if a.get(A.ACTIVITY) == "sync")
    assert syncs == Counter({("stream", "cudaStreamSynchronize"): 24})
    waits = sync_waits(tl)
    assert len(waits) == 24 and {w["type"] for w in waits} == {"stream"}
    assert A.sync_type_of_api("cudaEventQuery_v3020") == "poll" and A.sync_type_of_api("cuCtxSynchronize") == "context"
    assert A.sync_type_of_api("cudaLaunchKernel") is None


def _t(us: float) -> int:
    return T0 + int(us * US)


def test_a_recorded_poll_or_stream_wait_is_not_a_host_wait():
    """CUPTI records an event sync for ``cudaEventQuery`` and a stream-wait-event sync for ``cudaStreamWaitEvent``;
    neither blocks the host, so only the ``cudaStreamSynchronize`` is a sync wait."""
    res = {"service.name": "p", "host.name": "h", "process.pid": 7}
    ph = [{"span_id": 1, "name": "step", "start_ns": _t(0), "end_ns": _t(1000), "attributes": {"gputrace.lane": "thread:main"}}]
    recs = []
    for i, (api, typ) in enumerate((("cudaEventQuery", "EVENT_SYNCHRONIZE"), ("cudaStreamWaitEvent", "STREAM_WAIT_EVENT"),
                                    ("cudaStreamSynchronize", "STREAM_SYNCHRONIZE"))):
        s = 100 + 200 * i
        recs += [{"kind": "RUNTIME", "start": _t(s), "end": _t(s + 50), "name": api, "correlation_id": 10 + i},
                 {"kind": "SYNCHRONIZATION", "start": _t(s), "end": _t(s + 50), "device_id": 0, "stream_id": 1,
                  "type": f"CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_{typ}", "correlation_id": 10 + i, "thread": "main",
                  "phase": 1}]
    tl = activity_timeline(res, ph, recs)
    assert [w["type"] for w in sync_waits(tl)] == ["stream"]
