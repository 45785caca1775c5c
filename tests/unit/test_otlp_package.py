"""The OTLP codec is one package, ``gputrace.otlp``, used through its public names only."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import gputrace.otlp as otlp

ROOT = Path(__file__).resolve().parents[2]
CODEC = ROOT / "gputrace" / "otlp"


def test_package_names_are_the_modules_objects():
    from gputrace.otlp import decode, encode, ids, schema

    for name in otlp.__all__:
        obj = getattr(otlp, name)
        homes = [m for m in (decode, encode, ids, schema) if getattr(m, name, None) is obj and name in m.__all__]
        assert homes, f"gputrace.otlp.{name} is not the public name of one of its modules"
    with pytest.raises(AttributeError):
        otlp.no_such_name  # noqa: B018


def test_old_module_name_is_gone():
    # gputrace.otlp_json re-exported the codec's names under its old name; callers use gputrace.otlp.
    with pytest.raises(ModuleNotFoundError):
        __import__("gputrace.otlp_json")


def test_encoder_alone_does_not_import_msgspec_or_numpy():
    code = "import gputrace.otlp.encode, gputrace.otlp.ids, sys; print(sorted(m for m in sys.modules if m in ('msgspec', 'numpy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def _private_codec_imports(path: Path) -> list[str]:
    """``from gputrace.otlp... import _name`` and ``gputrace.otlp.<mod>._name`` in one file."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module == "gputrace.otlp"
                                                                 or node.module.startswith("gputrace.otlp.")):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("encode", "decode", "ids", "schema", "otlp"):
                found.append(f"{base.id}.{node.attr}")
    return found


def test_nothing_outside_the_codec_uses_its_private_names():
    files = [p for d in ("gputrace", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")
             if CODEC not in p.parents]
    bad = {str(p.relative_to(ROOT)): hits for p in files if (hits := _private_codec_imports(p))}
    assert not bad, bad


def test_the_private_name_check_can_fail(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from gputrace.otlp.encode import _span_json\nfrom gputrace.otlp import ids\nids._HEX_DIGITS\n")
    assert _private_codec_imports(p) == ["gputrace.otlp.encode._span_json", "ids._HEX_DIGITS"]
