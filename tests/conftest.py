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
def _no_columns_from_the_shell():
    """Reports off a terminal take their width from ``COLUMNS`` when it is set; tests (and the CLI subprocesses
    they start) see the fixed default unless they set it themselves."""
    import os

    old = os.environ.pop("COLUMNS", None)
    # GNU readline, which pytest's capture imports, sets COLUMNS and LINES in the C environment, which
    # subprocesses inherit but os.environ does not show: unset it there too.
    os.unsetenv("COLUMNS")
    yield
    if old is not None:
        os.environ["COLUMNS"] = old


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
def _no_resident_key():
    """Each test starts as a fresh process would: no proving key resident from an earlier test
    (``keygen.cache`` keeps the last key read, for a process that proves many times)."""
    from gputrace.prover.keygen import cache

    cache.drop_resident()
    yield
    cache.drop_resident()


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    sys.setrecursionlimit(_RECURSION_LIMIT)
    yield
    sys.setrecursionlimit(_RECURSION_LIMIT)


#: In the fast lane (``-m "not slow"``), tests not marked ``slow`` whose call took longer than this many seconds
#: are listed at the end of the run (a hint, never a failure: a loaded machine makes any test slower).
#: GPUTRACE_SLOW_HINT_S overrides it.
_SLOW_HINT_S = 2.0
_unmarked_slow: list[tuple[str, float]] = []


def _fast_lane(config) -> bool:
    return "not slow" in " ".join((config.getoption("markexpr", "") or "").split())


def pytest_runtest_logreport(report):
    if report.when == "call" and "slow" not in report.keywords:
        import os

        limit = float(os.environ.get("GPUTRACE_SLOW_HINT_S", _SLOW_HINT_S))
        if report.duration > limit:
            _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter, config):
    if not _fast_lane(config) or not _unmarked_slow:
        return
    tr = terminalreporter
    tr.section("tests in the fast lane that took long (mark them slow, or make them cheaper: CONTRIBUTING.md)")
    for nodeid, seconds in sorted(_unmarked_slow, key=lambda x: -x[1]):
        tr.write_line(f"{seconds:6.2f}s {nodeid}")
