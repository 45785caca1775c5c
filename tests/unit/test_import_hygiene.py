"""`import gputrace` stays light, and the layer arrows of ARCHITECTURE.md hold."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("cupy", "textual", "opentelemetry.sdk", "opentelemetry.exporter", "grpc", "scipy")


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()
    return set(out)


@pytest.mark.parametrize(
    "code",
    [
        "import gputrace",
        "import gputrace; gputrace.phase",
        "import gputrace.timeline",
        "import gputrace.cli",
    ],
)
def test_light_imports(code):
    loaded = _loaded_after(code)
    bad = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not bad, f"{code!r} imported heavy modules: {bad[:10]}"


def test_phase_works_without_cuda_or_configure():
    code = (
        "import gputrace\n"
        "with gputrace.phase('ntt', device=0):\n"
        "    pass\n"
        "@gputrace.phase('synthesis')\n"
        "def f(x):\n"
        "    return x + 1\n"
        "assert f(1) == 2\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout


def test_import_linter_contracts():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter not installed")
    out = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
