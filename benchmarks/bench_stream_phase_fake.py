"""Host cost of a phase with a stream while CUDA activity is collected (CUDA events off), without a GPU.

Runs on the CI box with the fake CuPy of tests/unit/test_trace_cuda_fake.py (no device work, so this times
gputrace's own Python work: the lane/device lookup and the phase), against a plain phase in the same process.
Usage: ``python benchmarks/bench_stream_phase_fake.py`` (thread CPU, 9 x 20k phases each, min and median).
"""
import sys, time, statistics
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit"))
from test_trace_cuda_fake import fake_cupy, FakeStream
sys.modules["cupy"] = fake_cupy()
import gputrace
from gputrace.trace import hotpath, MemorySink
gputrace.configure(sinks=[MemorySink()], collect_gpu_info=False, buffer_size=1 << 22)
hotpath.cuda_settings(False, None)   # events off, as with CUDA activity on (no CUPTI push here)
s = FakeStream()
phase = gputrace.phase
def loop(n):
    t0 = time.thread_time_ns()
    for _ in range(n):
        with phase("ntt", device=0, stream=s):
            pass
    return (time.thread_time_ns() - t0) / n
def plain(n):
    t0 = time.thread_time_ns()
    for _ in range(n):
        with phase("ntt", device=0):
            pass
    return (time.thread_time_ns() - t0) / n
loop(2000)
r = [(loop(20000), plain(20000)) for _ in range(9)]
print("stream phase (events off) min %.0f med %.0f ns; plain min %.0f med %.0f" % (min(a for a, b in r), statistics.median(a for a, b in r), min(b for a, b in r), statistics.median(b for a, b in r)))
gputrace.shutdown()
