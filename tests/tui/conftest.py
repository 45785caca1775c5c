import os

import pytest

DATA = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "data"))


@pytest.fixture
def sample_2gpu() -> str:
    """120 spans, 1 host, 2 GPUs x 2 streams, 2 batches (gputrace.testing.synthetic, seed 1)."""
    return os.path.join(DATA, "sample_2gpu.jsonl")


@pytest.fixture
def sample_pinning() -> str:
    """128 spans, 2 hosts x 1 GPU, 25 ms of extra pin/unpin host time per batch (seed 2)."""
    return os.path.join(DATA, "sample_pinning.jsonl")


@pytest.fixture
def sample_prove_cpu() -> str:
    """56 spans from a real run: `gputrace prove --constraints 2^10 --batch 2 --devices 2 --backend cpu`."""
    return os.path.join(DATA, "sample_prove_cpu.jsonl")


@pytest.fixture
def sample_kernels() -> str:
    """166 spans with GPU activity: 60 kernels, 4 copies (a pinned and a pageable per GPU), 10 memsets, a
    stream sync, on 2 GPUs (gputrace.testing.activity_synth.write_activity_run(kernels=60, gpus=2,
    kernels_per_phase=6, seed=1))."""
    return os.path.join(DATA, "sample_kernels.jsonl")
