"""The template instance whose R1CS names and checks a key: one synthesis per shape, the same on every path.

The R1CS's structure does not depend on the witness, so key generation and the fingerprint are computed from
one fixed instance of the shape (``TEMPLATE_SEED``, built with the switches ``TEMPLATE_OPTS``). The host path
builds the whole template (``template_cs``); the device path builds the template of a one-challenge shape of the
same depth (``block.block_template``) and repeats it K times. Both go through ``template_cs``, so they can
never disagree on the instance. The fingerprint records (``fingerprint_record``) key on these two constants.

Pure: no state, no threads; synthesis time grows with the shape (seconds at 2^20).
"""

from __future__ import annotations

from ..circuit import CircuitShape, make_instance
from ..r1cs import ConstraintSystem
from ..witness import build_cs

#: The template instance whose R1CS is fingerprinted (the structure does not depend on the witness).
TEMPLATE_SEED = -1
TEMPLATE_OPTS = frozenset({"a1"})


def template_cs(shape: CircuitShape) -> ConstraintSystem:
    """The shape's template R1CS (what the fingerprint and key generation are computed from)."""
    return build_cs(shape, make_instance(shape, seed=TEMPLATE_SEED), TEMPLATE_OPTS)
