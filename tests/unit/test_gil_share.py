"""gil_share.shared(): the switch interval is lowered while gputrace's threads work and given back after."""

import sys
import threading

import pytest

from gputrace.trace import gil_share


@pytest.fixture(autouse=True)
def _program_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(before)


def test_lowered_inside_and_restored_after():
    with gil_share.shared():
        assert sys.getswitchinterval() == pytest.approx(gil_share.SHARE_INTERVAL_S, abs=1e-6)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_overlapping_stretches_restore_once_at_the_end():
    """The exporter's drain and CUPTI's conversion may overlap on two threads: the first to end leaves it low."""
    inner_done = threading.Event()
    outer_may_end = threading.Event()

    def other():
        with gil_share.shared():
            inner_done.set()
            outer_may_end.wait(5)

    t = threading.Thread(target=other)
    with gil_share.shared():
        t.start()
        inner_done.wait(5)
    assert sys.getswitchinterval() == pytest.approx(gil_share.SHARE_INTERVAL_S, abs=1e-6)  # the other still works
    outer_may_end.set()
    t.join(5)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_value_the_program_set_meanwhile_is_kept():
    with gil_share.shared():
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_program_already_below_is_left_alone():
    sys.setswitchinterval(0.00005)
    with gil_share.shared():
        assert sys.getswitchinterval() == pytest.approx(0.00005, abs=1e-6)
    assert sys.getswitchinterval() == pytest.approx(0.00005, abs=1e-6)


def test_the_drain_and_the_cupti_conversion_share():
    """Both long GIL stretches of the recorder run inside shared() (the contract of the module docstring)."""
    import inspect

    from gputrace.trace.cupti_collect import CuptiCollector
    from gputrace.trace.recorder_drain import RecorderDrain

    assert "gil_share.shared()" in inspect.getsource(RecorderDrain.drain)
    assert "gil_share.shared()" in inspect.getsource(CuptiCollector._completed)
