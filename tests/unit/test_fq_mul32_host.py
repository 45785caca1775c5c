"""The carry-chain algorithm of ``gputrace/prover/kernels/fq_mul32.cuh`` (the MSM's 32-bit-limb PTX Fq
multiplication, addition, subtraction) built for the host with ``FQ32_HOST_EMULATION`` (the PTX carry flag
emulated in C++) by the system C++ compiler, against Python integers. Needs no GPU, so CI checks the chain
logic; the GPU build of the same code is checked in ``tests/gpu`` (``test_cuda_kernels.py`` Fq ops, MSMs).
Skipped only when no C++ compiler is found. Fresh random inputs each run (the seed is in every failure).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from gputrace.prover.encoding import Q

SEED = int.from_bytes(os.urandom(4), "little")
KERNELS = Path(__file__).resolve().parents[2] / "gputrace" / "prover" / "kernels"

_HOST_MAIN = r"""
#define FQ32_HOST_EMULATION
#include "fq_mul32.cuh"
#include <cstdio>
int main() {
    fq32_u64 a[6], b[6], r[6];
    while (scanf("%llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx", &a[0], &a[1], &a[2], &a[3], &a[4],
                 &a[5], &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) == 12) {
        fq32_mont_mul64(r, a, b);
        for (int k = 0; k < 6; k++) printf("%llx ", (unsigned long long)r[k]);
        fq32_add64(r, a, b);
        for (int k = 0; k < 6; k++) printf("%llx ", (unsigned long long)r[k]);
        fq32_sub64(r, a, b);
        for (int k = 0; k < 6; k++) printf("%llx ", (unsigned long long)r[k]);
        printf("\n");
    }
    return 0;
}
"""


def _limbs6(x: int) -> list[int]:
    return [(x >> (64 * i)) & ((1 << 64) - 1) for i in range(6)]


def test_fq32_chain_logic_on_host(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "fq32.cpp"
    src.write_text(_HOST_MAIN)
    exe = tmp_path / "fq32"
    subprocess.run([cxx, "-O1", "-std=c++17", f"-I{KERNELS}", str(src), "-o", str(exe)], check=True, timeout=120)
    rng = random.Random(SEED)
    r384 = 1 << 384
    edge = [0, 1, 2, Q - 1, Q - 2, Q // 2, Q // 2 + 1, r384 % Q, r384 * r384 % Q, (1 << 64) - 1, 1 << 320,
            (1 << 381) % Q]
    pairs = [(x, y) for x in edge for y in edge] + [(rng.randrange(Q), rng.randrange(Q)) for _ in range(3000)]
    text = "\n".join(" ".join(f"{v:x}" for v in _limbs6(x) + _limbs6(y)) for x, y in pairs) + "\n"
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True, timeout=60).stdout
    lines = out.splitlines()
    assert len(lines) == len(pairs)
    rinv = pow(r384, -1, Q)
    for (x, y), line in zip(pairs, lines, strict=True):
        h = [int(v, 16) for v in line.split()]
        got = [sum(h[6 * j + i] << (64 * i) for i in range(6)) for j in range(3)]
        assert got == [x * y * rinv % Q, (x + y) % Q, (x - y) % Q], f"x={x} y={y} (seed {SEED})"
