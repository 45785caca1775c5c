"""``record_control.pause``/``resume`` on a real GPU (``pytest -m gpu tests/gpu/test_record_control.py``).

Truth comes from the work: kernels that spin on the GPU's global timer for a set time, a distinct time before,
during and after a pause, so each CUPTI kernel record says which interval launched it.
"""

from __future__ import annotations

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
pytest.importorskip("cupti")

from gputrace.testing.gpu_kernels import SPIN_NS  # noqa: E402
from gputrace.trace import MemorySink, configure, record_control, shutdown  # noqa: E402

pytestmark = pytest.mark.gpu

_SPIN = SPIN_NS

_BEFORE_NS, _PAUSED_NS, _AFTER_NS = 1_000_000, 3_000_000, 5_000_000


def _spin_kernels(spans, lo_ns, hi_ns):
    return [s for s in spans if s["attributes"].get("gputrace.activity") == "kernel"
            and lo_ns <= s["end_ns"] - s["start_ns"] < hi_ns]


def test_pause_drops_the_paused_kernels_and_resume_collects_again():
    mem = MemorySink()
    rec = configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.1, cuda_activity=True)
    try:
        assert rec.cupti is not None, rec.cuda_activity_error
        k = cupy.RawKernel(_SPIN, "spin_ns")
        s = cupy.cuda.Stream(non_blocking=True)

        def launch(ns, n):
            with s:
                for _ in range(n):
                    k((1,), (1,), (np.uint64(ns),))
            s.synchronize()

        launch(_BEFORE_NS, 2)
        assert record_control.is_collecting()
        assert record_control.pause(drain=True) is True
        assert record_control.is_paused() and record_control.pause() is True  # idempotent
        launch(_PAUSED_NS, 3)
        assert record_control.resume() is True
        assert record_control.is_collecting()
        launch(_AFTER_NS, 4)
        (iv,) = record_control.paused_intervals()
    finally:
        shutdown()
    spans = mem.spans
    assert not rec.cupti.toggle_errors, rec.cupti.toggle_errors
    # The spin kernels last at least their time and a few microseconds more; 0.5 ms separates the three kinds.
    assert len(_spin_kernels(spans, _BEFORE_NS, _BEFORE_NS + 500_000)) == 2
    assert len(_spin_kernels(spans, _PAUSED_NS, _PAUSED_NS + 500_000)) == 0
    after = _spin_kernels(spans, _AFTER_NS, _AFTER_NS + 500_000)
    assert len(after) == 4
    assert all(x["start_ns"] >= iv[1] for x in after)
    (paused,) = [x for x in spans if x["name"] == "gputrace.record.paused"]
    assert (paused["start_ns"], paused["end_ns"]) == iv
    assert iv[1] - iv[0] >= 3 * _PAUSED_NS
    # The launching API records after the resume are collected again too (joined onto their kernels).
    assert all("cuda.api" in x["attributes"] and x["attributes"]["cuda.launch.api_start_ns"] >= iv[1]
               for x in after), [x["attributes"] for x in after]
