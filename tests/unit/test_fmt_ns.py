"""fmt_ns: durations as the report prints them; minutes never read '60.0 s'."""

import pytest

from gputrace.analysis._common import fmt_ns


@pytest.mark.parametrize(("ns", "text"), [(812, "812 ns"), (4_200, "4.2 µs"), (12_500_000, "12.5 ms"),
                                          (2_100_000_000, "2.1 s"), (185e9, "185 s"), (605e9, "10 m 05.0 s"),
                                          (3 * 3600e9 - 1e6, "180 m 00.0 s"), (10_799_960_000_000, "180 m 00.0 s"),
                                          (10_799_940_000_000, "179 m 59.9 s")])
def test_durations(ns, text):
    assert fmt_ns(ns) == text
