"""Errors name the user's path and say what is wrong in words: no ``[Errno N]``, no hidden temporary
file names, no traceback."""

from __future__ import annotations

import errno
import os

import pytest

from gputrace import cli
from gputrace.atomic_write import OutputError, atomic_output, write_atomic
from gputrace.commands._errors import describe_error

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "traces", "proof-2_16-cuda.jsonl.gz")


def test_export_into_a_missing_folder_names_the_users_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["export", "-f", "chrome", TRACE, "-o", "missing/dir/o.json"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.strip() == "gputrace export: cannot write missing/dir/o.json: the folder missing/dir does not exist"
    assert ".tmp" not in err and "Errno" not in err


def test_atomic_output_errors_carry_the_target(tmp_path):
    with pytest.raises(OutputError) as e:
        write_atomic(tmp_path / "nope" / "x.bin", b"1")
    assert e.value.filename == str(tmp_path / "nope" / "x.bin") and e.value.errno == errno.ENOENT
    assert isinstance(e.value, OSError)  # callers catching OSError still do
    with pytest.raises(OutputError, match="it is a folder"):
        write_atomic(tmp_path, b"1")
    # An OSError about another file raised in the body passes unchanged (it is not the output's fault).
    with pytest.raises(FileNotFoundError) as e2:
        with atomic_output(tmp_path / "ok.bin") as f:
            f.write(b"x")
            open(tmp_path / "input-that-is-gone")
    assert not isinstance(e2.value, OutputError) and not (tmp_path / "ok.bin").exists()
    assert os.listdir(tmp_path) == []  # no temporary file left behind


def test_read_errors_in_words(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "gone.jsonl")]) == 1
    assert capsys.readouterr().err.strip() == f"gputrace report: {tmp_path / 'gone.jsonl'}: no such file"
    assert cli.main(["report", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == f"gputrace report: {tmp_path}: it is a folder, not a file"


def test_top_level_handler_turns_an_uncaught_oserror_into_one_line(capsys, monkeypatch):
    import gputrace.commands.report as report

    def boom(args):
        raise PermissionError(errno.EACCES, "Permission denied", "/secret/\x1b[31mx")

    monkeypatch.setattr(report, "run", boom)
    assert cli.main(["report", "x"]) == 1
    err = capsys.readouterr().err
    assert "Errno" not in err and "\x1b" not in err and "permission denied" in err and "Traceback" not in err


def test_describe_error_plain_oserror_without_filename():
    assert describe_error(OSError(errno.ENOSPC, "No space left on device")) == "no space left on device"
