"""Nsight Systems SQLite exports (``nsys export --type sqlite``): ``read`` (``read_nsys``: NVTX ranges, CUDA
kernels, memcpys, memsets, syncs and API calls -> a Timeline), ``sqlite`` (opening the database, its schema
checks), ``columns`` (rows -> columns), ``device`` (GPU activity and API calls).

Read only (``gputrace import nsys`` writes the Timeline as OTLP JSONL). Importing this package imports none of
its modules (the format table loads them by name).
"""
