"""`compare` with GPU activity: per kernel name inside a phase (device clock) and kernel-truth busy time
per phase (clock "gpu busy"), on synthetic runs (gputrace.testing.activity_synth) where one kernel is slower."""

from __future__ import annotations

import pytest

from gputrace.analysis.ab.compare import compare_sets
from gputrace.analysis.ab.measures import run_measures
from gputrace.testing.activity_synth import activity_run_timeline


def _runs(seeds, **kw):
    return [activity_run_timeline(kernels=200, gpus=1, kernels_per_phase=20, seed=s, trace_id=f"{s:032x}", **kw)
            for s in seeds]


@pytest.fixture(scope="module")
def result():
    base = _runs(range(1, 9))
    variant = _runs(range(101, 109), kernel_scale={"msm_bucket": 1.6})
    return compare_sets(base, variant)


def test_measures_put_kernels_on_the_device_clock_and_phases_on_gpu_busy():
    (tl,) = _runs([1])
    keys = set(run_measures(tl).values)
    assert ("prove/msm_h/msm_bucket", None, "device") in keys
    assert ("prove/msm_h/msm_bucket", None, "host") not in keys  # activity has no separate host clock
    assert ("prove/msm_h", 0, "gpu busy") in keys and ("prove/msm_h", 0, "host") in keys


def test_the_slower_kernel_is_found_inside_its_phases(result):
    for phase in ("msm_h", "msm_l"):
        row = result.find(f"prove/{phase}/msm_bucket", None, "device")
        assert row is not None and row.verdict == "slower", (phase, row and row.verdict)
        assert 0.3 < row.rel < 0.9
    busy = result.find("prove/msm_h", None, "gpu busy")
    assert busy is not None and busy.verdict == "slower"
    other = result.find("prove/ntt/ntt_radix", None, "device")
    assert other is not None and other.verdict != "slower"
