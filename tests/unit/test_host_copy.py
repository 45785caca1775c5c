"""host_copy.parallel_copy: the staged key upload's copy, split over threads."""

import numpy as np
import pytest

from gputrace.prover import host_copy


@pytest.mark.parametrize("n", [0, 1, 7, (4 << 20) - 1, (4 << 20) + 3, 9_999_991])
@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_every_byte_is_copied_once_whatever_the_split(n, threads):
    rng = np.random.default_rng(n + threads)
    src = rng.integers(0, 256, n, dtype=np.uint8)
    dst = np.full(n, 0xA5, np.uint8)  # poisoned: an unwritten piece shows
    if n:
        dst[:] = ~src  # every byte differs from its source before the copy
    host_copy.parallel_copy(dst, src, threads=threads)
    assert np.array_equal(dst, src)


def test_views_into_larger_buffers_are_written_only_in_range():
    src = np.arange(6 << 20, dtype=np.uint8)
    big = np.zeros(8 << 20, np.uint8)
    host_copy.parallel_copy(big[1 << 20:7 << 20], src, threads=4)
    assert not big[:1 << 20].any() and not big[7 << 20:].any()
    assert np.array_equal(big[1 << 20:7 << 20], src)


@pytest.mark.parametrize("dst, src", [
    (np.zeros(10, np.uint8), np.zeros(11, np.uint8)),
    (np.zeros(10, np.uint8), np.zeros(10, np.uint16)),
    (np.zeros((2, 5), np.uint8), np.zeros((2, 5), np.uint8)),
])
def test_mismatched_arrays_are_refused(dst, src):
    with pytest.raises(ValueError, match="parallel_copy"):
        host_copy.parallel_copy(dst, src)


def test_a_failing_piece_is_raised_after_the_others_finish(monkeypatch):
    calls = []
    real = np.copyto

    def flaky(d, s):
        calls.append(len(s))
        if len(calls) == 2:
            raise RuntimeError("piece failed")
        real(d, s)

    monkeypatch.setattr(host_copy.np, "copyto", flaky)
    src = np.ones(8 << 20, np.uint8)
    dst = np.zeros_like(src)
    with pytest.raises(RuntimeError, match="piece failed"):
        host_copy.parallel_copy(dst, src, threads=4)
    assert len(calls) == 4  # every piece ran before the error came back
