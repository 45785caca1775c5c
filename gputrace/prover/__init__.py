"""gputrace.prover: the reference Groth16 prover (BLS12-381) whose phases gputrace traces.

Public API (resolved lazily so ``import gputrace.prover`` stays cheap):
``run_prove(ProveOptions) -> ProveResult``, ``ProveOptions``, ``ProveResult``, ``config_for``, ``verify_files``.
See docs/prover.md.
"""

from __future__ import annotations

import importlib

# First, before any module of this package: the circuit modules' source as they are about to be imported
# (fingerprint_record names recorded R1CS fingerprints by it).
from . import source_snapshot  # noqa: F401

_LAZY = {
    "run_prove": "gputrace.prover.pipeline",
    "config_for": "gputrace.prover.run_config",
    "ProveOptions": "gputrace.prover.options",
    "ProveResult": "gputrace.prover.options",
    "parse_opts": "gputrace.prover.options",
    "parse_size": "gputrace.prover.options",
    "OPT_NAMES": "gputrace.prover.options",
    "verify_files": "gputrace.prover.verify_files",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'gputrace.prover' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
