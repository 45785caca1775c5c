"""gputrace.analysis"""
