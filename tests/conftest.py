import importlib.util
import sys

import pytest

#: The interpreter's recursion limit before any test module is imported. py_ecc (the independent
#: verifier in test_groth16_independent) raises it to 100,000 on import; before Python 3.12 that lets
#: deep recursion in C decoders (json, msgspec) overflow the C stack instead of raising RecursionError,
#: so one module's import would change what every later test measures. Each test starts from this value.
_RECURSION_LIMIT = sys.getrecursionlimit()


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


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    sys.setrecursionlimit(_RECURSION_LIMIT)
    yield
    sys.setrecursionlimit(_RECURSION_LIMIT)
