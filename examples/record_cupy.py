"""A CuPy script with NVTX ranges: ``gputrace record -- python examples/record_cupy.py``.

Copies a pageable host array to the GPU, runs an FFT and a reduction inside NVTX ranges (the ``nvtx``
package's ``annotate``), and copies the result back.
"""

import numpy as np
import nvtx

import cupy

with nvtx.annotate("upload", domain="demo"):
    a = cupy.asarray(np.random.default_rng(1).random(1 << 22, dtype=np.float32))
with nvtx.annotate("fft", domain="demo"):
    f = cupy.fft.rfft(a)
with nvtx.annotate("reduce", domain="demo"):
    s = float(cupy.abs(f).sum())
cupy.cuda.Device().synchronize()
print(f"sum |rfft| = {s:.4g}")
