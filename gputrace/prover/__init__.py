"""gputrace.prover"""
