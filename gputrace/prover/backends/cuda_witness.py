"""Witness generation on one GPU (kernels/witness.cu) from ``witness_plan.WitnessPlan``.

``MerkleWitness(device).generate(plans, abc, stream)`` fills a batch's a/b/c block ``abc`` (CuPy ``(3B, n, 4)``,
``[a_0 .. a_B-1, b_0 .., c_0 ..]``, or with ``per_circuit=True`` ``[a_0, b_0, c_0, a_1, ..]``, zero-filled by the
caller) with A·z, B·z, C·z and returns the assignments
``z`` as a new CuPy ``(B, vars, 4)`` array, everything in Montgomery form, queued on ``stream`` (no host sync).
Inputs are the plans' few kilobytes each (indices, leaves, stand-in siblings); ``plan_witness`` is the CPU
reference.

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

    def generate(self, plans: list[WitnessPlan], abc: cupy.ndarray, stream, per_circuit: bool = False) -> cupy.ndarray:
        """Queue the witnesses of ``plans`` (one shape) on ``stream``: rows into ``abc`` (3B, n, 4), laid out
        [a_0 .. a_B-1, b_0 .., c_0 ..] (or [a_0, b_0, c_0, a_1, ..] with ``per_circuit``) and zero-filled by the
        caller; returns device ``z`` (B, vars, 4).
        One launch per tree level covers every circuit of the batch (one thread per circuit and challenge)."""
        nb = len(plans)
        shape = plans[0].shape
        if any(p.shape != shape for p in plans):
            raise ValueError("device witness: every circuit of a batch must have the same shape")
        k_n, depth = shape.challenges, shape.depth
        ni, m = plans[0].num_inputs, plans[0].num_constraints
        n = abc.shape[1]
        if abc.shape != (3 * nb, n, 4):
            raise ValueError(f"device witness: a/b/c block {abc.shape} for {nb} circuits")
        if m + ni > n:
            raise ValueError(f"{m} constraints + {ni} inputs exceed the domain {n}")
        nvars = ni + k_n * vars_per_challenge(depth)
        idx = np.stack([np.ascontiguousarray(p.indices, dtype=np.uint64) for p in plans])  # (B, K)
        # leaves (canonical), stand-in siblings (canonical), indices as Fr (Montgomery already): one upload
        small = np.concatenate([np.concatenate([p.leaves.reshape(-1, 4) for p in plans]),
                                np.concatenate([p.sib_const.reshape(-1, 4) for p in plans]),
                                mont_limbs([int(i) for i in idx.ravel()])])
        src_host = np.ascontiguousarray(np.stack([p.sib_src for p in plans]), dtype=np.int32)  # (B, D, K)
        nl, ns = nb * k_n, nb * depth * k_n
        sj, sv = (3, 1) if per_circuit else (1, nb)  # rows of circuit j: a = j*sj, b = a + sv, c = a + 2*sv
        with stream:
            consts = self._constants(stream)
            dev_small = empty(small.shape, np.uint64, "witness leaves and siblings", self.device)
            check("cudaMemcpyAsync(H2D witness leaves and siblings)", dev_small.set, small, stream=stream)
            self._ntt.to_mont(dev_small[:nl + ns], stream)  # leaves and siblings -> Montgomery
            cur = empty((nb, depth + 1, k_n, 4), np.uint64, "witness tree nodes", self.device)
            cur[:, 0] = dev_small[:nl].reshape(nb, k_n, 4)
            sib_const = dev_small[nl:nl + ns]
            idx_mont = dev_small[nl + ns:]
            src = empty(src_host.shape, np.int32, "witness sibling sources", self.device)
            check("cudaMemcpyAsync(H2D witness sibling sources)", src.set, src_host, stream=stream)
            didx = empty(idx.shape, np.uint64, "witness indices", self.device)
            check("cudaMemcpyAsync(H2D witness indices)", didx.set, idx, stream=stream)
            z = check(f"device witness: z ({nb} x {nvars} x 32 bytes)", cupy.zeros, (nb, nvars, 4), dtype=np.uint64)
            for level in range(depth):
                launch(self._level, "merkle_level", nb * k_n,
                       (consts, i32(level), i32(depth), u64(k_n), u64(nb), didx, src, sib_const, cur, abc, u64(n),
                        z, u64(nvars), u64(ni), u64(sj), u64(sv)), stream, block=BLOCK)
            launch(self._finish, "merkle_finish", nb * ni,
                   (i32(depth), u64(k_n), u64(nb), idx_mont, cur, abc, u64(n), z, u64(nvars), u64(m), u64(sj),
                    u64(sv)),
                   stream, block=BLOCK)
        return z
