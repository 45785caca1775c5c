"""Groth16 key generation (a single-party setup, not a ceremony).

By default the toxic waste (τ, α, β, γ, δ) is drawn from the operating system's CSPRNG
(``secrets.SystemRandom``) and forgotten: nobody, including this process afterwards, can forge
proofs for the key. With a ``seed`` it is derived from the seed instead: reproducible and cacheable
in CI, and a TEST key: anyone who knows the seed knows the toxic waste and can forge proofs for any
input. ``cache`` keeps test keys apart and ``vk.json`` says which kind a key is.

Follows bellman's ``generate_parameters``: the R1CS gets one extra row per public input
(``input_i · 0 = 0``) so the input polynomials are linearly independent; the domain is the
smallest power of two >= constraints + inputs; u_i(τ), v_i(τ), w_i(τ) come from the Lagrange
basis at τ; key elements are fixed-base multiples of the generators (``fixed_base``).

Two paths give the same keys byte for byte: ``generate`` (host: the whole template R1CS, Python ints,
a CPU process pool) and ``generate_device`` (a CUDA device: the circuit's block, ``block``, and
``backends/cuda_fixed_base``); ``cache.get_keys`` picks one (``keygen``).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

import gputrace

from .. import fixed_base
from ..field import R, batch_inv, inv, root_of_unity
from ..r1cs import ConstraintSystem
from .block import BlockTemplate


@dataclass
class ProvingKey:
    """Groth16 proving key. Queries are sequences of host arkworks points (lists, or ``fixed_base.PointRows``
    that decode their rows on first use); ``l`` covers private variables only."""

    alpha_g1: G1Point
    beta_g1: G1Point
    beta_g2: G2Point
    delta_g1: G1Point
    delta_g2: G2Point
    a: Sequence[G1Point]
    b_g1: Sequence[G1Point]
    b_g2: Sequence[G2Point]
    l: Sequence[G1Point]  # noqa: E741 (the Groth16 L query, as the paper and bellman name it)
    h: Sequence[G1Point]
    domain_size: int
    num_inputs: int  # including ONE
    num_vars: int
    fingerprint: str
    #: xy-LE encodings of the queries as generated or read from ``pk.npz`` (bytes or ``uint8`` row arrays;
    #: saves re-encoding when writing the key, and converting points when a GPU loads the bases).
    raw: dict | None = None

    def affine_limbs(self, name: str) -> np.ndarray | None:
        """Query ``name`` as affine limbs, a view of ``raw`` (what ``encoding.g1_to_affine_limbs`` /
        ``g2_to_affine_limbs`` give, without per-point work): G1 (``a``, ``b_g1``, ``l``, ``h``) ``(n, 2, 6)``,
        G2 (``b_g2``) ``(n, 2, 2, 6)``; None without ``raw``."""
        buf = (self.raw or {}).get(name)
        if buf is None:
            return None
        arr = np.frombuffer(buf, dtype="<u8")
        n = len(getattr(self, name))
        if name == "b_g2":
            return arr.reshape(n, 2, 2, 6) if arr.size == 24 * n else None
        return arr.reshape(n, 2, 6) if arr.size == 12 * n else None


@dataclass
class VerifyingKey:
    alpha_g1: G1Point
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g2: G2Point
    ic: list[G1Point]  # one per input including ONE


def domain_size_for(cs: ConstraintSystem) -> int:
    rows = cs.num_constraints + cs.num_inputs
    n = 2
    while n < rows:
        n <<= 1
    return n


def lagrange_at(tau: int, n: int) -> list[int]:
    """L_j(τ) for the size-n domain: (τ^n − 1)/n · ω^j / (τ − ω^j)."""
    w = root_of_unity(n)
    pts = [1] * n
    for j in range(1, n):
        pts[j] = pts[j - 1] * w % R
    zt = (pow(tau, n, R) - 1) % R
    scale = zt * inv(n) % R
    invs = batch_inv([(tau - p) % R for p in pts])
    return [scale * p % R * iv % R for p, iv in zip(pts, invs, strict=True)]


def _toxic_waste(seed: int | None) -> tuple[int, int, int, int, int]:
    """τ, α, β, γ, δ: from the OS CSPRNG, or from ``seed`` (a TEST key)."""
    rng = secrets.SystemRandom() if seed is None else random.Random(f"groth16-setup:{seed}")
    tau, alpha, beta, gamma, delta = (rng.randrange(1, R) for _ in range(5))
    return tau, alpha, beta, gamma, delta


def generate(cs: ConstraintSystem, seed: int | None = None,
             workers: int | None = None) -> tuple[ProvingKey, VerifyingKey]:
    """Keys for ``cs``'s structure: fresh random toxic waste, or derived from ``seed`` (a TEST key; see the
    module doc). The host path: Python ints, fixed-base multiples on a process pool."""
    tau, alpha, beta, gamma, delta = _toxic_waste(seed)
    n = domain_size_for(cs)
    m, ni, nv = cs.num_constraints, cs.num_inputs, cs.num_vars
    with gputrace.phase("setup_qap", kind="host", domain=n, keygen="host"):  # u, v, w at τ (serial Python)
        lag = lagrange_at(tau, n)
        u = cs.column_sums(0, lag)
        v = cs.column_sums(1, lag)
        w = cs.column_sums(2, lag)
    for i in range(ni):  # the input rows input_i * 0 = 0
        u[i] = (u[i] + lag[m + i]) % R
    gi, di = inv(gamma), inv(delta)
    ic_s = [(beta * u[i] + alpha * v[i] + w[i]) * gi % R for i in range(ni)]
    l_s = [(beta * u[i] + alpha * v[i] + w[i]) * di % R for i in range(ni, nv)]
    zt_d = (pow(tau, n, R) - 1) * di % R
    h_s = []
    acc = zt_d
    for _ in range(n - 1):
        h_s.append(acc)
        acc = acc * tau % R
    jobs = [
        ("g1", u), ("g1", v), ("g2", v), ("g1", l_s), ("g1", h_s), ("g1", ic_s),
        ("g1", [alpha, beta, delta]), ("g2", [beta, gamma, delta]),
    ]
    with gputrace.phase("setup_fixed_base", kind="host", points=sum(len(j[1]) for j in jobs), keygen="host"):
        out = fixed_base.mul_gen_many(jobs, workers)
    with gputrace.phase("setup_decode", kind="host"):
        a_q, b1_q, l_q, h_q, ic, g1x = (fixed_base.decode_g1(out[i]) for i in (0, 1, 3, 4, 5, 6))
        b2_q, g2x = fixed_base.decode_g2(out[2]), fixed_base.decode_g2(out[7])
    pk = ProvingKey(
        alpha_g1=g1x[0], beta_g1=g1x[1], beta_g2=g2x[0], delta_g1=g1x[2], delta_g2=g2x[2],
        a=a_q, b_g1=b1_q, b_g2=b2_q, l=l_q, h=h_q,
        domain_size=n, num_inputs=ni, num_vars=nv, fingerprint=cs.fingerprint(),
        raw={"a": out[0], "b_g1": out[1], "b_g2": out[2], "l": out[3], "h": out[4]},
    )
    vk = VerifyingKey(alpha_g1=g1x[0], beta_g2=g2x[0], gamma_g2=g2x[1], delta_g2=g2x[2], ic=ic)
    return pk, vk


def generate_device(block: BlockTemplate, fingerprint: str, seed: int | None = None, device: int = 0,
                    qap=None) -> tuple[ProvingKey, VerifyingKey]:
    """The same keys as ``generate(template R1CS, seed)``, byte for byte, computed on CUDA ``device``:
    the QAP from the circuit's block (``block``), every fixed-base multiple on the GPU
    (``backends/cuda_fixed_base``). The queries stay xy rows (``fixed_base.PointRows``: arkworks points
    only when a host path asks). ``fingerprint``: the template R1CS's (the caller has it from the block);
    ``qap``: a ``QapGpu`` of ``block`` to reuse. Imports CuPy; BackendError on CUDA failures."""
    from ..backends import cuda_fixed_base as cfb  # lazy: CuPy

    tau, alpha, beta, gamma, delta = _toxic_waste(seed)
    n, ni, nv = block.domain_size(), block.num_inputs, block.num_vars
    with gputrace.phase("setup_qap", kind="host", domain=n, keygen="device"):
        q = qap if qap is not None else cfb.QapGpu(block, device)
        sc = cfb.key_scalars(q, tau, alpha, beta, gamma, delta)
    with gputrace.phase("setup_fixed_base", kind="host", points=4 * nv + n - 1 - ni + len(sc["ic"]) + 6,
                        keygen="device", device=device):
        fb = cfb.FixedBaseGpu(device)
        raw = {"a": fb.mul_rows("g1", sc.pop("u")), "b_g1": fb.mul_rows("g1", sc["v"]),
               "b_g2": fb.mul_rows("g2", sc.pop("v")), "l": fb.mul_rows("g1", sc.pop("l")),
               "h": fb.mul_rows("g1", sc.pop("h"))}
        ic_rows = fb.mul_rows("g1", sc["ic"])
        g1x_rows = fb.mul_rows("g1", [alpha, beta, delta])
        g2x_rows = fb.mul_rows("g2", [beta, gamma, delta])
        del fb, sc, q
        cfb.release_memory(device)  # the prover that follows allocates its own (2^25: 60 GiB)
    with gputrace.phase("setup_decode", kind="host"):
        ic = fixed_base.decode_g1(ic_rows.tobytes())
        g1x, g2x = fixed_base.decode_g1(g1x_rows.tobytes()), fixed_base.decode_g2(g2x_rows.tobytes())
        queries = {name: fixed_base.PointRows(rows, "g2" if name == "b_g2" else "g1", f"proving key query {name}")
                   for name, rows in raw.items()}
    pk = ProvingKey(
        alpha_g1=g1x[0], beta_g1=g1x[1], beta_g2=g2x[0], delta_g1=g1x[2], delta_g2=g2x[2],
        a=queries["a"], b_g1=queries["b_g1"], b_g2=queries["b_g2"], l=queries["l"], h=queries["h"],
        domain_size=n, num_inputs=ni, num_vars=nv, fingerprint=fingerprint, raw=raw,
    )
    vk = VerifyingKey(alpha_g1=g1x[0], beta_g2=g2x[0], gamma_g2=g2x[1], delta_g2=g2x[2], ic=ic)
    return pk, vk
