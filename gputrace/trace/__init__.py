"""gputrace.trace"""
