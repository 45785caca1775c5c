"""``_assemble``: a Groth16 proof from its MSM sums, blinded with a fresh r and s (``secrets``) per proof.

Host arithmetic on arkworks points; raises nothing of its own. Threads: a device's worker thread (the whole-batch
flow, ``batch_flow._device_work``) or its ``assemble-N`` helper thread (the stream flows, which get it as the
``assemble`` argument of ``device_flow.stream_work``).
"""

from __future__ import annotations

import secrets

from .field import R, to_scalar
from .keygen.setup import ProvingKey
from .verify import Proof


def _assemble(pk: ProvingKey, sum_a, sum_b1, sum_l, sum_h, sum_b2) -> Proof:
    r = secrets.randbelow(R - 1) + 1  # fresh blinding per proof (zero knowledge)
    s = secrets.randbelow(R - 1) + 1
    rs, ss = to_scalar(r), to_scalar(s)
    a = pk.alpha_g1 + sum_a + pk.delta_g1 * rs
    b2 = pk.beta_g2 + sum_b2 + pk.delta_g2 * ss
    b1 = pk.beta_g1 + sum_b1 + pk.delta_g1 * ss
    c = sum_l + sum_h + a * ss + b1 * rs - pk.delta_g1 * to_scalar(r * s)
    return Proof(a=a, b=b2, c=c)
