"""A thread that never marked work nor fed a GPU (tqdm's monitor, a usage reporter: Python frames only, waiting
through a torch.profiler window) is not the host work a GPU waited for: GPU-idle gaps and their finding name
the threads that did work (``gputrace.analysis.api_calls.background_lanes``)."""

from __future__ import annotations

import json

from gputrace.analysis.api_calls import background_lanes
from gputrace.analysis.gaps import gpu_idle_gaps
from gputrace.commands.report import analyse
from gputrace.timeline import read_any


def _trace(tmp_path, with_background: bool = True):
    main, bg = 100, 200
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#6", "pid": 1, "tid": main, "ts": 0.0,
           "dur": 3000.0}]
    for i, t in enumerate((10.0, 2500.0)):  # two launches with 2.4 ms of host preprocessing between them
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": main, "ts": t,
                   "dur": 5.0, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 10, "dur": 50.0,
                   "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    ev.append({"ph": "X", "cat": "python_function", "name": "image_transforms.py(390): normalize", "pid": 1,
               "tid": main, "ts": 100.0, "dur": 2000.0})
    if with_background:
        ev += [{"ph": "X", "cat": "python_function", "name": "tqdm/_monitor.py(60): run", "pid": 1, "tid": bg,
                "ts": 0.0, "dur": 3000.0},
               {"ph": "X", "cat": "python_function", "name": "threading.py(359): wait", "pid": 1, "tid": bg,
                "ts": 1.0, "dur": 2998.0}]
    ev.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": bg, "args": {"name": "tqdm monitor"}})
    p = tmp_path / f"k{int(with_background)}.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    return read_any(p)


def test_only_the_waiting_thread_is_background(tmp_path):
    tl = _trace(tmp_path)
    bg = background_lanes(tl)
    named = {tl.lanes[i].name for i in range(len(tl.lanes)) if bg[i]}
    assert len(named) == 1 and "tqdm monitor" in next(iter(named))


def test_the_gpu_idle_gap_names_the_working_thread_not_the_waiting_one(tmp_path):
    tl = _trace(tmp_path)
    gaps = gpu_idle_gaps(tl)
    big = gaps.largest(1)[0]
    names = [p for p, _ in big.host_activity]
    assert names and names[0] == "image_transforms.py(390): normalize"
    assert not any("wait" in n or "tqdm" in n for n in names)
    # the same as with no background thread at all
    assert big.host_activity == gpu_idle_gaps(_trace(tmp_path, with_background=False)).largest(1)[0].host_activity
    [f] = [f for f in analyse(tl)["findings"] if f["rule"] == "gpu-idle-host"]
    assert "normalize" in f["title"] and "wait" not in f["title"]


def test_a_thread_with_a_phase_or_a_cuda_call_is_never_background(tmp_path):
    from gputrace.testing.synth import make_timeline

    tl = make_timeline([{"name": "prove", "start": 0, "end": 100, "kind": "host", "lane": "thread:main"},
                        {"name": "synthesis", "start": 0, "end": 50, "kind": "host", "lane": "thread:worker"}])
    assert not background_lanes(tl).any()  # a record trace: phases on every thread
    tl = _trace(tmp_path)
    main = [i for i, ln in enumerate(tl.lanes) if ln.name.startswith("thread:") and "tqdm" not in ln.name]
    assert main and not background_lanes(tl)[main].any()
