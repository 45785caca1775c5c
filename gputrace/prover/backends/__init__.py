"""Prover backends: ``base`` (the interface), ``cpu``, ``cuda`` (imported lazily: needs CuPy).

``make_backend(name, devices)`` returns ``(backend, notice)``: ``name`` is ``cpu``, ``cuda`` or
``auto``. ``cuda`` raises ``BackendUnavailable`` if CuPy or a GPU is missing (or the CUDA backend fails
to start); ``auto`` then falls back to the CPU and returns a one-line ``notice`` saying why. More CPU worker lanes than
``options.check_cpu_lanes`` allows is a ValueError naming ``--devices``. The CUDA backend's contract:
``gputrace.prover.backends.cuda.CudaBackend(devices: int)`` implementing ``base.ProverBackend``.
"""

from __future__ import annotations

from .base import BackendUnavailable, ProverBackend

BACKENDS = ("auto", "cpu", "cuda")


def make_backend(name: str, devices: int) -> tuple[ProverBackend, str | None]:
    if name not in BACKENDS:
        raise ValueError(f"--backend: expected one of {', '.join(BACKENDS)}, got {name!r}")
    reason: str | None = None
    notice: str | None = None
    if name in ("cuda", "auto"):
        try:
            from .cuda import CudaBackend  # lazy: imports cupy

            return CudaBackend(devices), None
        except Exception as exc:  # ImportError (no CuPy), BackendUnavailable (no GPU), CUDA runtime errors
            if name == "cuda":
                what = str(exc) if isinstance(exc, BackendUnavailable) else f"{type(exc).__name__}: {exc}"
                raise BackendUnavailable(f"--backend cuda: CUDA backend unavailable: {what}") from exc
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            notice = f"note: CUDA backend unavailable ({reason}); using the CPU backend"
    from gputrace.prover.options import check_cpu_lanes

    from .cpu import CpuBackend

    try:
        check_cpu_lanes(devices)
    except ValueError as exc:
        if reason is None:
            raise
        raise ValueError(f"{exc} (the CUDA backend is unavailable: {reason})") from None
    return CpuBackend(devices), notice
