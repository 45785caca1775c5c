"""The column tools of the Nsight importer (gputrace.timeline.formats.nsys.columns) against plain-Python references."""

from __future__ import annotations

import numpy as np
import pytest

from gputrace.timeline.formats.nsys.columns import CorrIndex, groups, ints, shifted


def _reference_groups(*keys):
    seen: dict[tuple, int] = {}
    first, gid = [], []
    for r, k in enumerate(zip(*(np.asarray(c).tolist() for c in keys), strict=True)):
        if k not in seen:
            seen[k] = len(first)
            first.append(r)
        gid.append(seen[k])
    return first, gid


def test_groups_are_numbered_by_first_appearance():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, 2000)
    b = rng.integers(-3, 3, 2000) * (1 << 40)
    c = rng.random(2000) < 0.3
    const = np.full(2000, 7)
    first, g = groups(a, const, b, c)
    ref_first, ref_g = _reference_groups(a, const, b, c)
    assert first.tolist() == ref_first and g.tolist() == ref_g


def test_groups_refactorise_before_the_code_overflows():
    rng = np.random.default_rng(2)
    cols = [rng.integers(0, 1 << 20, 3000) for _ in range(7)]  # ~1500^7 > 2^62 codes: must not wrap
    for c in cols:
        c[1500:] = c[:1500]  # the second half repeats the first
    first, g = groups(*cols)
    ref_first, ref_g = _reference_groups(*cols)
    assert first.tolist() == ref_first and g.tolist() == ref_g and len(first) == 1500


def test_correlation_index_last_row_wins_per_process():
    proc = np.array([1, 1, 2, 1, 2], np.int64)
    corr = np.array([10, 11, 10, 10, 12], np.int64)
    rows = np.array([100, 101, 102, 103, 104], np.int64)
    ix = CorrIndex(proc, corr, rows)
    found = ix.find(np.array([1, 1, 2, 2, 3, 1], np.int64), np.array([10, 11, 10, 11, 10, 12], np.int64))
    assert found.tolist() == [103, 101, 102, -1, -1, -1]


def test_ints_and_shifted_refuse_what_a_row_by_row_read_would():
    assert ints(np.array([1, None, 3], dtype=object), -1).tolist() == [1, -1, 3]
    with pytest.raises(TypeError):
        ints(np.array([1, None], dtype=object))
    with pytest.raises(ValueError):
        ints(np.array(["soon"], dtype=object))
    with pytest.raises(OverflowError):
        ints(np.array([1 << 64], dtype=object))
    with pytest.raises(OverflowError):
        shifted(np.array([(1 << 63) - 10], np.int64), 100)
    assert shifted(np.array([5], np.int64), 100).tolist() == [105]


def test_groups_never_lose_a_key_to_wrap_around():
    # Eight columns of 256 values after a two-valued one: 2 * 256^8 codes; a wrapping int64 code would
    # multiply the first column by 2^64 and merge rows that differ only there.
    first_col = np.repeat([0, 1], 256)
    rest = [np.tile(np.arange(256), 2) for _ in range(8)]
    first, g = groups(first_col, *rest)
    assert len(first) == 512 and g.tolist() == list(range(512))
