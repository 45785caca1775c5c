"""``gputrace.git.commit`` names gputrace's commit, never that of another repository the package
happens to be installed in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gputrace.trace.environment import _git_commit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _repo(root: Path, pyproject: str | None) -> str:
    pkg = root / "site" / "gputrace"
    pkg.mkdir(parents=True)
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    (pkg / "x.py").write_text("")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(root), "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, env=env, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_a_foreign_enclosing_repository_is_not_recorded(tmp_path):
    _repo(tmp_path, '[project]\nname = "someone-elses-app"\n')
    assert _git_commit(str(tmp_path / "site" / "gputrace")) is None


def test_a_repository_without_pyproject_is_not_recorded(tmp_path):
    _repo(tmp_path, None)
    assert _git_commit(str(tmp_path / "site" / "gputrace")) is None


def test_gputraces_own_checkout_is_recorded(tmp_path):
    sha = _repo(tmp_path, '[project]\nname = "gputrace"\nversion = "0"\n')
    assert _git_commit(str(tmp_path / "site" / "gputrace")) == sha


def test_outside_any_repository(tmp_path):
    assert _git_commit(str(tmp_path)) is None


@pytest.mark.parametrize("text, ours", [
    ('[project]\ndependencies = ["a[b]"]\nname = "gputrace"\n', True),
    ('[project]\nname = "other"\n[tool.x]\nname = "gputrace"\n', False),
    ('[tool.x]\nname = "gputrace"\n', False),
    ("not toml at all [", False),
])
@pytest.mark.parametrize("python", ["3.11+", "3.10"])
def test_only_the_project_sections_name_counts(tmp_path, monkeypatch, text, ours, python):
    from types import SimpleNamespace

    from gputrace.trace import environment

    if python == "3.10":  # no tomllib there: the [project] table's name line
        monkeypatch.setattr(environment, "sys", SimpleNamespace(version_info=(3, 10, 0)))
    (tmp_path / "pyproject.toml").write_text(text)
    assert environment._is_gputrace_checkout(str(tmp_path)) is ours
