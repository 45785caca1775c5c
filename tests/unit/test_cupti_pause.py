"""``cupti_pause.PauseLog``: the paused intervals and toggle errors of the CUPTI collector, without CUPTI."""

from __future__ import annotations

import pytest

from gputrace.trace.cupti_pause import MAX_PAUSED_KEPT, PauseLog


def test_intervals_are_counted_kept_and_taken_once():
    log = PauseLog()
    assert log.resource() == {} and log.at is None
    log.begin(100, "main")
    assert log.resource()["gputrace.record.paused_count"] == 0  # a pause in force is reported
    log.end(250)
    log.begin(300, "worker")
    log.end(290)  # an end before its start is taken as the start
    assert log.paused == [(100, 250, "main"), (300, 300, "worker")]
    assert (log.count, log.total_ns) == (2, 150)
    assert log.take() == log.paused and log.take() == []
    assert log.resource() == {"gputrace.record.paused_count": 2, "gputrace.record.paused_total_ns": 150,
                              "gputrace.record.paused_ns": [100, 250, 300, 300]}


def test_only_the_first_intervals_are_kept_but_all_are_counted_and_taken():
    log = PauseLog()
    for i in range(MAX_PAUSED_KEPT + 3):
        log.begin(10 * i, "t")
        log.end(10 * i + 1)
    assert len(log.paused) == MAX_PAUSED_KEPT and log.count == MAX_PAUSED_KEPT + 3
    assert len(log.take()) == MAX_PAUSED_KEPT + 3


def test_toggle_errors_are_capped_and_reported():
    log = PauseLog()
    kept = [log.error(f"pause: flush: {i}") for i in range(25)]
    assert kept == [True] * 20 + [False] * 5 and len(log.toggle_errors) == 20
    assert log.resource()["gputrace.record.pause_errors"] == log.toggle_errors


def test_ending_without_a_pause_is_a_bug():
    with pytest.raises(AssertionError):
        PauseLog().end(1)
