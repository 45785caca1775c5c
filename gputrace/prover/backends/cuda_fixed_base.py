"""Key generation on a CUDA device (imports CuPy): ``kernels/fixed_base.cu`` driven from the host.

``FixedBaseGpu(device).mul(group, scalars)`` gives k·G for every scalar k (``"g1"``/``"g2"``) as the
rows ``ProvingKey.raw`` and ``pk.npz`` hold: ``uint8`` ``(n, 96)`` / ``(n, 192)``, the xy little-endian
encodings of ``fixed_base.mul_gen`` byte for byte (the identity as zeros). The generator's window table
is the CPU path's (``fixed_base._table``), uploaded once per group.

``QapGpu(block, device)`` computes, for the K copies of a circuit block (``keygen.block``), the Lagrange
weights at τ, the column sums u/v/w(τ), the row values of the fingerprint, and the scalar vectors the key
needs (the l and h queries'); Fr vectors stay on the device in Montgomery form until ``canonical``.

Errors: CUDA failures and out-of-memory are ``BackendError`` naming the call (``cuda_kernels``); τ on
the domain is ``ZeroDivisionError`` (as ``keygen.setup.lagrange_at``). One device per object; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

import cupy
import numpy as np

from .. import fixed_base
from ..field import R, ints_to_limbs, inv, limbs_to_ints, root_of_unity
from ..keygen.block import BlockTemplate, fingerprint_digest, fingerprint_vector
from . import cuda_kernels as ck

# The kernel loader's registry of modules (compile-once cache, prebuilt cubins, kernel_report).
ck.MODULES.setdefault("fixed_base", ("fixed_base.cu", ()))
MODULE = "fixed_base"
#: u64 words of one affine point.
WORDS = {"g1": 12, "g2": 24}
_MONT = (1 << 256) % R


def device_available() -> bool:
    """A CUDA device is usable from this process (CuPy imported, at least one device)."""
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except RuntimeError:  # cupy's CUDARuntimeError: no driver or no device
        return False


def mont_limbs(values: Sequence[int]) -> np.ndarray:
    """Fr ints -> Montgomery-form limbs ``(n, 4)`` (for constants and small vectors)."""
    return ints_to_limbs([v % R * _MONT % R for v in values])


class FixedBaseGpu:
    """Fixed-base multiplication of the G1/G2 generators on ``device``."""

    def __init__(self, device: int = 0) -> None:
        self.device = device
        self._tables: dict[str, cupy.ndarray] = {}

    def _k(self, fn: str):
        return ck.kernel(MODULE, self.device, fn)

    def table(self, group: str) -> cupy.ndarray:
        """The 32 x 256 window table of ``group``'s generator on the device (affine, Montgomery)."""
        t = self._tables.get(group)
        if t is None:
            rows = fixed_base._table(group)
            zero = bytes(8 * WORDS[group])
            # d = 0 entries are never read (zero digits are skipped); zeros keep the table free of encodings.
            buf = b"".join(zero if d == 0 else p.to_xy_bytes_le() for row in rows for d, p in enumerate(row))
            with cupy.cuda.Device(self.device):
                t = ck.check(f"fixed_base table {group}", cupy.asarray, np.frombuffer(buf, dtype="<u8"))
                ck.launch(self._k("fb_fq_to_mont"), f"fixed_base table {group}", t.size // 6,
                          (t, np.uint64(t.size // 6)), None)
            self._tables[group] = t
        return t

    def mul(self, group: str, scalars) -> cupy.ndarray:
        """k·G for each canonical scalar row of ``scalars`` (CuPy or numpy ``(n, 4)`` uint64, or a list of
        ints): the device array ``(n, WORDS[group])`` of canonical affine limbs."""
        if group not in WORDS:
            raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")
        with cupy.cuda.Device(self.device):
            if isinstance(scalars, (list, tuple)):
                scalars = ints_to_limbs([k % R for k in scalars])
            s = ck.check("fixed_base scalars", cupy.ascontiguousarray, cupy.asarray(scalars, dtype=cupy.uint64))
            s = s.reshape(-1, 4)
            n = s.shape[0]
            out = ck.empty((n, WORDS[group]), np.uint64, f"fixed_base mul {group} ({n} points)", self.device)
            ck.launch(self._k(f"fb_mul_{group}"), f"fixed_base mul {group}", n,
                      (s, np.uint64(n), self.table(group), out), None, block=128)
        return out

    def mul_rows(self, group: str, scalars) -> np.ndarray:
        """``mul`` copied to the host as key rows: ``uint8`` ``(n, 8 * WORDS[group])``."""
        out = self.mul(group, scalars)
        with cupy.cuda.Device(self.device):
            host = ck.check(f"fixed_base d2h {group}", cupy.asnumpy, out)
            del out
        return host.view(np.uint8).reshape(-1, 8 * WORDS[group])


class QapGpu:
    """The block's terms on ``device``, and the Fr kernels of key generation over its K copies."""

    def __init__(self, block: BlockTemplate, device: int = 0) -> None:
        self.block = block
        self.device = device
        self._cols: list[tuple] = []
        self._rows: list[tuple] = []
        with cupy.cuda.Device(device):
            for rows, vars_, coefs in block.terms:
                coef_m = mont_limbs(coefs)
                order = np.argsort(vars_, kind="stable")  # by column, for qap_columns
                colptr = np.searchsorted(vars_[order], np.arange(block.block_vars + 1)).astype(np.int64)
                self._cols.append((cupy.asarray(colptr), cupy.asarray(rows[order].astype(np.int32)),
                                   cupy.asarray(coef_m[order])))
                if rows.size and np.any(np.diff(rows) < 0):
                    raise RuntimeError("block terms are not in row order")
                rowptr = np.searchsorted(rows, np.arange(block.per + 1)).astype(np.int64)
                self._rows.append((cupy.asarray(rowptr), cupy.asarray(vars_.astype(np.int32)), cupy.asarray(coef_m)))

    def _k(self, fn: str):
        return ck.kernel(MODULE, self.device, fn)

    def _const(self, *values: int) -> cupy.ndarray:
        return cupy.asarray(mont_limbs(values))

    def _empty(self, n: int, what: str) -> cupy.ndarray:
        return ck.empty((n, 4), np.uint64, what, self.device)

    def lagrange(self, tau: int, n: int) -> cupy.ndarray:
        """L_j(τ) for the size-n domain (Montgomery, ``(n, 4)``), as ``setup.lagrange_at``."""
        scale = (pow(tau, n, R) - 1) % R * inv(n) % R
        with cupy.cuda.Device(self.device):
            out = self._empty(n, "qap lagrange")
            err = cupy.zeros(1, dtype=cupy.int32)
            ck.launch(self._k("qap_lagrange"), "qap lagrange", n,
                      (out, np.uint64(n), self._const(root_of_unity(n), tau, scale), err), None)
            if int(err.get()[0]):
                raise ZeroDivisionError("inverse of 0 in Fr (tau is a point of the domain)")
        return out

    def columns(self, m: int, lag: cupy.ndarray) -> cupy.ndarray:
        """Matrix m's column sums against ``lag`` per copy: ``(K, block_vars, 4)`` Montgomery."""
        b = self.block
        colptr, trow, tcoef = self._cols[m]
        with cupy.cuda.Device(self.device):
            out = self._empty(b.challenges * b.block_vars, "qap columns")
            ck.launch(self._k("qap_columns"), "qap columns", b.challenges * b.block_vars,
                      (lag, colptr, trow, tcoef, np.uint64(b.block_vars), np.uint64(b.challenges),
                       np.uint64(b.per), out), None)
        return out.reshape(b.challenges, b.block_vars, 4)

    def row_values(self, m: int, z: cupy.ndarray) -> cupy.ndarray:
        """Matrix m times ``z`` (Montgomery, one row per global variable): ``(constraints, 4)`` Montgomery."""
        b = self.block
        rowptr, tvar, tcoef = self._rows[m]
        with cupy.cuda.Device(self.device):
            out = self._empty(b.num_constraints, "qap rows")
            ck.launch(self._k("qap_rows"), "qap rows", b.num_constraints,
                      (z, rowptr, tvar, tcoef, np.uint64(b.per), np.uint64(b.challenges), np.uint64(b.vpc), out),
                      None)
        return out

    def combine(self, u: cupy.ndarray, v: cupy.ndarray, w: cupy.ndarray, beta: int, alpha: int, g: int) -> cupy.ndarray:
        """(β·u + α·v + w)·g elementwise (Montgomery)."""
        n = u.shape[0]
        with cupy.cuda.Device(self.device):
            out = self._empty(n, "qap combine")
            ck.launch(self._k("qap_combine"), "qap combine", n,
                      (cupy.ascontiguousarray(u), cupy.ascontiguousarray(v), cupy.ascontiguousarray(w),
                       np.uint64(n), self._const(beta, alpha, g), out), None)
        return out

    def powers(self, start: int, x: int, n: int) -> cupy.ndarray:
        """start·x^i for i < n (Montgomery)."""
        with cupy.cuda.Device(self.device):
            out = self._empty(n, "qap powers")
            ck.launch(self._k("qap_powers"), "qap powers", n, (np.uint64(n), self._const(start, x), out), None)
        return out

    def to_mont(self, limbs) -> cupy.ndarray:
        """Canonical limbs (host or device) -> a new device array in Montgomery form."""
        with cupy.cuda.Device(self.device):
            a = cupy.array(limbs, dtype=cupy.uint64).reshape(-1, 4)
            ck.launch(self._k("fb_fr_to_mont"), "fr to_mont", a.shape[0], (a, np.uint64(a.shape[0])), None)
        return a

    def canonical(self, a: cupy.ndarray) -> cupy.ndarray:
        """Montgomery -> a new contiguous device array of canonical limbs."""
        with cupy.cuda.Device(self.device):
            c = cupy.array(a, dtype=cupy.uint64).reshape(-1, 4)
            ck.launch(self._k("fb_fr_from_mont"), "fr from_mont", c.shape[0], (c, np.uint64(c.shape[0])), None)
        return c

    def ints(self, a: cupy.ndarray) -> list[int]:
        """Montgomery device vector -> canonical Python ints (small vectors only)."""
        with cupy.cuda.Device(self.device):
            return limbs_to_ints(cupy.asnumpy(self.canonical(a)))


def fingerprint(q: QapGpu) -> str:
    """``ConstraintSystem.fingerprint`` of the block's whole template R1CS, computed on the device."""
    b = q.block

    def parts():  # row values come back in 128 MiB pieces, hashed as they arrive (no copy of all 3 x 32 x m bytes)
        with cupy.cuda.Device(q.device):
            z = q.to_mont(fingerprint_vector(b.num_vars))
            for m in range(3):
                rows = q.canonical(q.row_values(m, z))
                for i in range(0, rows.shape[0], 1 << 22):
                    yield ck.check("fingerprint d2h", cupy.asnumpy, rows[i:i + (1 << 22)])
                del rows
            del z

    return fingerprint_digest(b.num_inputs, b.num_vars, b.num_constraints, parts())


def release_memory(device: int = 0) -> None:
    """Give CuPy's cached blocks on ``device`` back to the driver (after key generation, before proving)."""
    with cupy.cuda.Device(device):
        cupy.get_default_memory_pool().free_all_blocks()


def key_scalars(q: QapGpu, tau: int, alpha: int, beta: int, gamma: int, delta: int) -> dict:
    """The scalars of every key query for toxic waste (τ, α, β, γ, δ), as ``setup.generate`` makes them:
    ``u``, ``v`` (all variables), ``l`` (private variables) and ``h`` (n − 1 powers) as device arrays of
    canonical limbs, ``ic`` (inputs) as Python ints."""
    b = q.block
    n, m, ni = b.domain_size(), b.num_constraints, b.num_inputs
    with cupy.cuda.Device(q.device):
        lag = q.lagrange(tau, n)
        lag_inputs = q.ints(lag[m:m + ni])  # the input rows input_i * 0 = 0 (u only)
        inputs, private = [], []
        for mat in range(3):
            s = q.columns(mat, lag)  # (K, 3 + vpc, 4): ONE, root, index, then the private variables
            head = q.ints(s[:, :3].reshape(-1, 4))
            inputs.append([sum(head[0::3]) % R, sum(head[1::3]) % R] + head[2::3])
            private.append(cupy.ascontiguousarray(s[:, 3:]).reshape(-1, 4))  # global order K + 2 + k*vpc + j
            del s
        del lag
        inputs[0] = [(x + y) % R for x, y in zip(inputs[0], lag_inputs, strict=True)]
        gi, di = inv(gamma), inv(delta)
        ic = [(beta * u + alpha * v + w) * gi % R for u, v, w in zip(*inputs, strict=True)]
        l_q = q.canonical(q.combine(private[0], private[1], private[2], beta, alpha, di))
        h_q = q.canonical(q.powers((pow(tau, n, R) - 1) * di % R, tau, n - 1))
        u_q = cupy.concatenate([cupy.asarray(ints_to_limbs(inputs[0])), q.canonical(private[0])])
        v_q = cupy.concatenate([cupy.asarray(ints_to_limbs(inputs[1])), q.canonical(private[1])])
        del private
    assert u_q.shape[0] == b.num_vars and l_q.shape[0] == b.num_vars - ni and h_q.shape[0] == n - 1
    return {"u": u_q, "v": v_q, "l": l_q, "h": h_q, "ic": ic}
