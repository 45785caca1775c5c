"""The GPU activity vocabulary (gputrace.activity): CUPTI enum names, nsys enum names and nsys labels
all map onto one set of values."""

from __future__ import annotations

import pytest

from gputrace import activity as A


@pytest.mark.parametrize("label,want", [
    ("CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE", "PAGEABLE"), ("CUDA_MEMOPR_MEMORY_KIND_PINNED", "PINNED"),
    ("Pageable", "PAGEABLE"), ("Pinned", "PINNED"), ("Device", "DEVICE"), ("Pinned (page-locked)", "PINNED"),
    ("CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC", "DEVICE_STATIC"), ("Managed Static", "MANAGED_STATIC"),
    ("CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN", "UNKNOWN"), ("something else", "UNKNOWN"), (None, "UNKNOWN"),
])
def test_memory_kind(label, want):
    assert A.memory_kind(label) == want


@pytest.mark.parametrize("label,want", [
    ("CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", "HtoD"), ("CUDA_MEMCPY_KIND_DTOH", "DtoH"), ("Host-to-Device", "HtoD"),
    ("Device-to-Host", "DtoH"), ("Device-to-Device", "DtoD"), ("Peer-to-Peer", "PtoP"), ("HtoD", "HtoD"),
    ("CUPTI_ACTIVITY_MEMCPY_KIND_HTOA", "HtoD"), ("CUPTI_ACTIVITY_MEMCPY_KIND_ATOH", "DtoH"),
    ("CUPTI_ACTIVITY_MEMCPY_KIND_HTOH", "HtoH"), ("Unknown", "unknown"), (None, "unknown"),
])
def test_copy_kind(label, want):
    assert A.copy_kind(label) == want


@pytest.mark.parametrize("label,want", [
    ("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "stream"),
    ("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "event"),
    ("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "context"),
    ("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "stream_wait_event"),
    ("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "unknown"), ("stream", "stream"), (None, "unknown"),
])
def test_sync_type(label, want):
    assert A.sync_type(label) == want


@pytest.mark.parametrize("full,short", [
    ("void ntt_kernel<256>(Fr*, int)", "ntt_kernel"), ("void ns::inner::msm<(int)3, true>(P const*, int)", "msm"),
    ("kernel_plain", "kernel_plain"), ("_Z3fooPi", "_Z3fooPi"), ("void f<(a>b)>(int)", "f"),
    ("cub::DeviceReduceKernel<Policy, int*>(int*)", "DeviceReduceKernel"),
])
def test_short_kernel_name(full, short):
    assert A.short_kernel_name(full) == short


def test_span_names():
    assert A.memcpy_name("HtoD") == "[CUDA memcpy HtoD]" and A.sync_name("event") == "[CUDA sync event]"
    assert A.MEMSET_NAME == "[CUDA memset]"
