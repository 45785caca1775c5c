import importlib.util

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs CUDA and CuPy (run on the GPU machine)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
