"""The command line: no prefix matching of options, and a typo in a subcommand's option shows that
subcommand's usage (with the closest option), not the top-level one."""

from __future__ import annotations

import pytest

from gputrace.cli import build_parser


def test_no_parser_matches_options_by_prefix():
    p = build_parser()
    assert p.allow_abbrev is False
    assert p.subcommands and all(s.allow_abbrev is False for s in p.subcommands.values())


def test_ab_switch_is_not_taken_as_switches(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["ab", "--opt-sets", "none", "all", "--switch", "A1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gputrace ab ")
    assert "unrecognized arguments: --switch A1 (did you mean --switches?)" in err


def test_typo_in_a_subcommand_flag_shows_the_subcommands_usage(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["report", "t.jsonl", "--topp", "3"])
    err = capsys.readouterr().err
    assert err.startswith("usage: gputrace report ") and "gputrace report: error: unrecognized arguments: --topp" in err
    assert "(did you mean --top?)" in err and "COMMAND" not in err


def test_prefix_of_a_long_option_is_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compare", "a", "--vs", "b", "--conf", "0.9"])
    assert "did you mean --confidence?" in capsys.readouterr().err
    ok = build_parser().parse_args(["compare", "a", "--vs", "b", "--confidence", "0.9"])
    assert ok.confidence == 0.9


def test_prove_summary_names_lanes_as_report_does():
    from gputrace.analysis.lanes import device_name
    from gputrace.commands.prove import lane_column

    assert lane_column("host") == device_name(-1) == "CPU"
    assert lane_column("cuda:1") == device_name(1) == "GPU 1"
    assert lane_column("cpu:0") == "CPU thread:cpu-worker-0"
    assert lane_column("odd") == "odd"


@pytest.mark.parametrize("typed, hint", [
    (["--tarce", "t.jsonl"], "(did you mean --trace?)"),
    (["--no-cuda"], "(did you mean --no-cuda-activity?)"),
    (["-x"], ""),
])
def test_a_mistyped_record_flag_is_a_usage_error_naming_it(capsys, typed, hint):
    # record's COMMAND positional shares the name of the subparsers' dest: the typo used to crash with
    # "TypeError: unhashable type: 'list'" instead of reaching record's parser.
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["record", *typed, "--", "python", "-c", "pass"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gputrace record ")
    assert f"gputrace record: error: unrecognized arguments: {typed[0]}" in err
    assert hint in err and "Traceback" not in err


def test_the_subcommand_name_survives_records_command_positional():
    from gputrace.cli import subcommand

    ns = build_parser().parse_args(["record", "--", "python", "-c", "pass"])
    assert subcommand(ns) == "record" and ns.command == ["--", "python", "-c", "pass"]
    assert subcommand(build_parser().parse_args(["report", "t.jsonl"])) == "report"
