"""CUDA C sources of kernels whose GPU time is known in advance, for the GPU tests (compiled there with
``cupy.RawKernel``; nothing here imports CUDA).

``SPIN_NS`` defines ``spin_ns(unsigned long long ns)``: one thread reads the GPU's global timer until ``ns``
nanoseconds have passed, so a CUPTI kernel record of it lasts ``ns`` plus a few microseconds.
"""

from __future__ import annotations

__all__ = ["SPIN_NS"]

SPIN_NS = r"""
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""
