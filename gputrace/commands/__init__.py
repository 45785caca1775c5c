"""One module per CLI subcommand (see gputrace.cli)."""
