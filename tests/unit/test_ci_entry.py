"""CI runs what the README tells a user to run: `.ci/run` holds the README's test command, character for
character, and CONTRIBUTING.md gives both lanes (the fast one and the whole suite)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_test_command() -> str:
    """The command line under the README's "the whole test suite" comment in its first bash block."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^# the whole test suite[^\n]*\n([^\n]+)$", text, re.MULTILINE)
    assert m, "README.md has no '# the whole test suite' line followed by its command"
    return m.group(1).strip()


def test_ci_runs_the_readme_test_command():
    command = readme_test_command()
    assert command.endswith("-m pytest -q"), command
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci, f".ci/run does not run the README's test command:\n{command}"


def test_contributing_gives_both_lanes():
    commands = {ln.split("#")[0].strip() for ln in (ROOT / "CONTRIBUTING.md").read_text().splitlines()}
    assert '.venv/bin/python -m pytest -q -m "not slow"' in commands
    assert ".venv/bin/python -m pytest -q" in commands
