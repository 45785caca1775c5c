"""gputrace.prover.backends"""
