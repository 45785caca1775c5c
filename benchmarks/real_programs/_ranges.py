"""Named ranges for the real programs: one helper so every program annotates the same way.

``named_range(name, how)`` is a context manager that opens, as ``how`` says:

* ``"nvtx"``: a ``torch.cuda.nvtx`` range (what an ordinary PyTorch program does; ``gputrace record`` turns NVTX
  ranges into spans through CUPTI, so only on a CUDA machine). On a CPU-only PyTorch, NVTX is not built in and
  this opens nothing.
* ``"gputrace"``: a ``gputrace.phase`` (recorded by ``gputrace record`` on CPU and GPU alike; a no-op when no
  recorder is configured, i.e. when the program runs without ``record``). Falls back to ``"nvtx"`` when
  gputrace cannot be imported.
* ``"none"``: nothing from this helper.

In every case it also opens ``torch.profiler.record_function(name)``, which costs almost nothing unless
``torch.profiler`` is active, so the ``--profile`` (Kineto) trace carries the same names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

HOWS = ("nvtx", "gputrace", "none")


def _nvtx_usable() -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        torch.cuda.nvtx.range_push("probe")
        torch.cuda.nvtx.range_pop()
    except RuntimeError:  # a build without NVTX
        return False
    return True


def resolve(how: str) -> str:
    """What ``how`` becomes on this machine: "nvtx" without CUDA/NVTX -> "none"; "gputrace" without gputrace
    -> "nvtx" (then possibly "none")."""
    if how == "gputrace":
        try:
            import gputrace  # noqa: F401  (only whether it imports)
        except ImportError:
            how = "nvtx"
    if how == "nvtx" and not _nvtx_usable():
        how = "none"
    return how


@contextlib.contextmanager
def named_range(name: str, how: str) -> Iterator[None]:
    """``how`` must be a value returned by :func:`resolve`."""
    with torch.profiler.record_function(name):
        if how == "nvtx":
            torch.cuda.nvtx.range_push(name)
            try:
                yield
            finally:
                torch.cuda.nvtx.range_pop()
        elif how == "gputrace":
            import gputrace

            with gputrace.phase(name):
                yield
        else:
            yield
