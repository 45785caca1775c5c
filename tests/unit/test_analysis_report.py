"""The analysis composition (`analyse_timeline`): honest totals under one listing policy,
repeats grouped and ranked by time lost, unattributed time only on host parents."""

from __future__ import annotations

import pytest

from gputrace.analysis.report import analyse_timeline, default_min_lost
from gputrace.testing.synth import make_timeline

MS = 1_000_000
S = 1_000 * MS


def busy_1_in_5(seconds: int = 10):
    """A GPU busy 1 ms in every 5 ms for ``seconds`` under one host ``prove``."""
    spans = [{"id": "p", "name": "prove", "start": 0, "end": seconds * S}]
    for k in range(seconds * 200):
        t = k * 5 * MS
        spans.append({"name": "msm_h", "start": t, "end": t + MS, "gpu_start": t, "gpu_end": t + MS, "device": 0,
                      "parent": "p"})
    return make_timeline(spans, resource={"gputrace.run_id": "r"})


def test_busy_1ms_in_5ms_is_80_percent_idle_whatever_the_listing_threshold():
    tl = busy_1_in_5()
    for min_lost in (None, 1, 10 * S):
        a = analyse_timeline(tl, min_lost_ns=min_lost)
        (dev,) = a.devices
        assert dev.idle_share == pytest.approx(0.8, abs=0.001)  # every 4 ms gap counts, listed or not
        assert dev.busy_ns == 2000 * MS and dev.gaps == 2000  # 1999 between + 1 trailing
    # The 1999 between-gaps are one row, not 1999: "4 ms x 1,999".
    a = analyse_timeline(tl)
    idle = [s for s in a.stalls if s.category == "idle"]
    big = max(idle, key=lambda s: s.lost_ns)
    assert big.count == 1999 and big.lost_ns == 1999 * 4 * MS and big.each_ns == 4 * MS
    assert "4 ms x 1,999 (8 s)" in big.text
    # A threshold above everything lists nothing but says what it left out.
    hidden = analyse_timeline(tl, min_lost_ns=100 * S)
    assert hidden.listed == [] and hidden.listing.hidden_rows == len(hidden.stalls) > 0
    assert hidden.listing.hidden_ns == sum(s.lost_ns for s in hidden.stalls)
    assert "not listed" in hidden.listing.describe() and "totals count every gap" in hidden.listing.describe()


def test_default_listing_threshold():
    assert default_min_lost(10 * S) == 10 * MS
    assert default_min_lost(100) == 1_000


def test_repeated_waits_grouped_and_ranked_by_time_lost():
    # 40 host syncs of 2.5 ms inside prove (100 ms lost) outrank one 60 ms GPU idle gap.
    spans = [{"id": "p", "name": "prove", "start": 0, "end": 400 * MS},
             {"name": "msm_l", "start": 0, "end": 10 * MS, "gpu_start": 0, "gpu_end": 10 * MS, "device": 0, "parent": "p"},
             {"name": "msm_a", "start": 70 * MS, "end": 400 * MS, "gpu_start": 70 * MS, "gpu_end": 400 * MS,
              "device": 0, "parent": "p", "lane": "stream:1"}]
    for k in range(40):
        t = 10 * MS + k * 5 * MS
        spans.append({"name": "sync", "start": t, "end": t + 2_500_000, "parent": "p"})
    a = analyse_timeline(make_timeline(spans))
    first, second = a.listed[0], a.listed[1]
    assert first.category == "wait" and first.count == 40 and first.lost_ns == 100 * MS
    assert "sync on thread:main: host waited 2.5 ms x 40 (100 ms) in prove" == first.text
    assert second.category == "idle" and second.lost_ns == 60 * MS and second.count == 1
    assert [s.lost_ns for s in a.stalls] == sorted((s.lost_ns for s in a.stalls), reverse=True)


def test_unattributed_only_for_host_parents():
    # msm_h (GPU) with a small copy child: its own kernel work, not 99 % unattributed.
    # prove (host) with an unrecorded 30 ms at the start: that is unattributed.
    tl = make_timeline([
        {"id": "p", "name": "prove", "start": 0, "end": 100 * MS},
        {"id": "m", "name": "msm_h", "start": 30 * MS, "end": 100 * MS, "gpu_start": 30 * MS, "gpu_end": 100 * MS,
         "device": 0, "parent": "p"},
        {"name": "d2h", "start": 99 * MS, "end": 100 * MS, "gpu_start": 99 * MS, "gpu_end": 100 * MS, "device": 0,
         "parent": "m"},
    ])
    a = analyse_timeline(tl)
    un = [s for s in a.stalls if s.category == "unattributed"]
    assert [s.text for s in un] == ["prove: 30 ms (30% of its time) not covered by any child span"]
    assert [p["path"] for p in a.unattributed_paths] == ["prove"]
    from gputrace.analysis.unattributed import unattributed_time

    assert {tl.path(int(r)) for r in unattributed_time(tl, parents="all").row} == {"prove", "prove/msm_h"}
    with pytest.raises(ValueError, match="parents"):
        unattributed_time(tl, parents="gpu")


def test_json_document_lists_what_the_ranked_list_shows():
    a = analyse_timeline(busy_1_in_5(1), top=1)
    d = a.to_dict()
    assert len(d["stalls"]) == 1 and d["stalls"][0] == a.stalls[0].to_dict()
    assert d["listing"]["shown_rows"] == 1 and d["listing"]["hidden_rows"] == len(a.stalls) - 1
    assert d["gpu_idle"]["per_device"][0]["idle_share"] == pytest.approx(0.8, abs=0.001)
    with pytest.raises(ValueError):
        analyse_timeline(busy_1_in_5(1), top=-1)


def test_emulated_costs_are_named_in_the_report_and_its_json():
    tl = make_timeline([{"name": "prove", "start": 0, "end": 10 * MS}],
                       resource={"gputrace.run_id": "r", "gputrace.emulated.pin_share": 0.084,
                                 "gputrace.config.b1": True})
    a = analyse_timeline(tl)
    assert a.emulated == {"gputrace.emulated.pin_share": ["0.084"]}
    assert a.to_dict()["emulated"] == a.emulated
    assert a.emulated_note() == "emulated costs recorded in this trace (not real work): pin_share=0.084"
    assert analyse_timeline(make_timeline([{"name": "prove", "start": 0, "end": 1}])).emulated_note() == ""
