"""gputrace.tui"""
