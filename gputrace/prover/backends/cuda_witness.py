"""Witness generation on one GPU (kernels/witness.cu) from ``witness_plan.WitnessPlan``.

``MerkleWitness(device).generate(plan, a, b, c, stream)`` fills the domain rows ``a``, ``b``, ``c`` (CuPy
``(n, 4)`` views, zero-filled by the caller) with A·z, B·z, C·z and returns the assignment ``z`` as a new
CuPy ``(vars, 4)`` array, everything in Montgomery form, queued on ``stream`` (no host sync). Inputs are the
plan's few kilobytes (indices, leaves, stand-in siblings); ``plan_witness`` is the CPU reference.

Thread: one instance per device, used by that device's worker thread. Raises ``BackendError``.
"""

from __future__ import annotations

import cupy
import numpy as np

from .. import poseidon
from ..witness_plan import WitnessPlan, vars_per_challenge
from .cuda_kernels import check, empty, i32, kernel, launch, u64
from .cuda_ntt import FrNtt, mont_limbs

#: Threads per block: a 2^20 circuit has K = 267 challenges, so small blocks spread them over more SMs.
BLOCK = 32


class MerkleWitness:
    """Witness engine for one device (see module docstring)."""

    def __init__(self, device: int, ntt: FrNtt) -> None:
        self.device = device
        self._ntt = ntt
        self._level = kernel("witness", device, "merkle_level")
        self._finish = kernel("witness", device, "merkle_finish")
        rcs, mds = poseidon.constants()
        self._consts_host = mont_limbs(list(rcs) + [x for row in mds for x in row])
        self._consts: dict[int, cupy.ndarray] = {}  # per stream pointer: filled on the stream that reads it

    def _constants(self, stream) -> cupy.ndarray:
        key = int(stream.ptr)
        d = self._consts.get(key)
        if d is None:
            with stream:
                d = empty(self._consts_host.shape, np.uint64, "Poseidon constants", self.device)
                check("cudaMemcpyAsync(H2D Poseidon constants)", d.set, self._consts_host, stream=stream)
            self._consts[key] = d
        return d

    def generate(self, plan: WitnessPlan, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, stream) -> cupy.ndarray:
        """Queue the witness of ``plan`` on ``stream``: rows into ``a``/``b``/``c``; returns device ``z``."""
        k_n, depth = plan.shape.challenges, plan.shape.depth
        ni, m = plan.num_inputs, plan.num_constraints
        n = a.shape[0]
        if m + ni > n:
            raise ValueError(f"{m} constraints + {ni} inputs exceed the domain {n}")
        nvars = ni + k_n * vars_per_challenge(depth)
        with stream:
            consts = self._constants(stream)
            host_idx = np.ascontiguousarray(plan.indices, dtype=np.uint64)
            small = np.concatenate([plan.leaves.reshape(-1, 4), mont_limbs([int(i) for i in host_idx])])
            dev_small = empty(small.shape, np.uint64, "witness leaves", self.device)
            check("cudaMemcpyAsync(H2D witness leaves)", dev_small.set, small, stream=stream)
            self._ntt.to_mont(dev_small[:k_n], stream)  # leaves canonical -> Montgomery; indices already are
            idx_mont = dev_small[k_n:]
            cur = empty((depth + 1, k_n, 4), np.uint64, "witness tree nodes", self.device)
            cur[0] = dev_small[:k_n]
            sib_const = empty(plan.sib_const.shape, np.uint64, "witness siblings", self.device)
            check("cudaMemcpyAsync(H2D witness siblings)", sib_const.set, np.ascontiguousarray(plan.sib_const),
                  stream=stream)
            self._ntt.to_mont(sib_const.reshape(-1, 4), stream)
            src = empty(plan.sib_src.shape, np.int32, "witness sibling sources", self.device)
            check("cudaMemcpyAsync(H2D witness sibling sources)", src.set, np.ascontiguousarray(plan.sib_src),
                  stream=stream)
            didx = empty((k_n,), np.uint64, "witness indices", self.device)
            check("cudaMemcpyAsync(H2D witness indices)", didx.set, host_idx, stream=stream)
            z = cupy.zeros((nvars, 4), dtype=np.uint64)
            z_aux = z[ni:]
            for level in range(depth):
                launch(self._level, "merkle_level", k_n,
                       (consts, i32(level), i32(depth), u64(k_n), didx, src, sib_const, cur, a, b, c, z_aux),
                       stream, block=BLOCK)
            launch(self._finish, "merkle_finish", ni,
                   (i32(depth), u64(k_n), idx_mont, cur, a, b, c, z, u64(m)), stream, block=BLOCK)
        return z
