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


@pytest.fixture(autouse=True, scope="session")
def _private_trace_cache(tmp_path_factory):
    """Tests (and the CLI subprocesses they start) keep the columnar trace cache in a temporary
    directory, never the user's ~/.cache."""
    import os

    old = os.environ.get("GPUTRACE_CACHE_DIR")
    os.environ["GPUTRACE_CACHE_DIR"] = str(tmp_path_factory.mktemp("gputrace-cache"))
    yield
    if old is None:
        os.environ.pop("GPUTRACE_CACHE_DIR", None)
    else:
        os.environ["GPUTRACE_CACHE_DIR"] = old
