"""The source bytes of the circuit modules, read when ``gputrace.prover`` is imported, before any of them is.

``fingerprint_record`` names a recorded R1CS fingerprint by a digest of the circuit modules' source. That
digest must be of the code this process runs; reading the files later (when ``fingerprint_record`` is first
imported) would pair source edited after, say, ``circuit`` was imported with a fingerprint computed by the
old code. Python imports a package's ``__init__`` before any of its modules, so ``gputrace/prover/__init__.py``
imports this module first and ``SNAPSHOT`` holds the bytes the modules are then compiled from.

Imports nothing from ``gputrace`` (it runs inside the package's ``__init__``). Not thread-sensitive: read once.
"""

from __future__ import annotations

from pathlib import Path

#: Modules whose source determines the template R1CS and its fingerprint (all in this package).
SOURCE_MODULES = (
    "gputrace.prover.witness",
    "gputrace.prover.circuit",
    "gputrace.prover.r1cs",
    "gputrace.prover.poseidon",
    "gputrace.prover.field",
)


def package_file(name: str) -> Path:
    """Where the package's module ``name`` (``gputrace.prover.X``) is read from."""
    return Path(__file__).resolve().parent / (name.rpartition(".")[2] + ".py")


def read_sources(names: tuple[str, ...] = SOURCE_MODULES) -> dict[str, tuple[Path, bytes]] | None:
    """``{name: (file, bytes)}``, or None when one cannot be read (a frozen build: no source)."""
    out = {}
    for name in names:
        path = package_file(name)
        try:
            out[name] = (path, path.read_bytes())
        except OSError:
            return None
    return out


#: The sources as this process found them before importing them (None: records are not used).
SNAPSHOT = read_sources()
