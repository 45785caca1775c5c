"""What CUPTI is installed here, asked without starting it: whether ``cupti`` imports, where its shared library
is, which package versions provide it. Imports ``cupti`` only inside ``available`` (never at import).

Any thread. The failures these expect (no package, no library, no GPU) are answers, not exceptions: a reason,
None, ``"unknown"``.
"""

from __future__ import annotations

__all__ = ["available", "library_path", "version"]


def available() -> str | None:
    """None when CUPTI can be imported, else a one-line reason."""
    try:
        import cupti  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or the library failing to load (OSError, RuntimeError)
        return f"cupti-python not usable: {type(e).__name__}: {e}"
    return None


def library_path() -> str | None:
    """Path of the CUPTI shared library (for ``NVTX_INJECTION64_PATH``), or None. Loads no CUDA driver."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return str(load_nvidia_dynamic_lib("cupti").abs_path)
    except Exception:  # noqa: BLE001 any failure: fall back to the glob below
        pass
    import glob
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations or []) if spec else []:
        for pat in ("**/lib/libcupti.so*", "**/lib64/libcupti.so*"):
            hits = sorted(glob.glob(f"{root}/{pat}", recursive=True))
            if hits:
                return hits[0]
    return None


def version() -> str:
    """The installed CUPTI packages and their versions (``gputrace.cupti.version``), or ``"unknown"``."""
    from importlib import metadata

    parts = []
    for dist in ("cupti-python", "nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return "; ".join(parts) or "unknown"
