"""OTLP JSON Lines, gputrace's own trace format (and the OTel file exporters'): the reader and the writer.

Read side: ``read`` (whole reads, the parallel decision), ``incremental`` (progressive reads and follow),
``parallel`` (worker processes), ``_feed`` (whole files into a loader), ``_loader`` (``TraceLoader``, the
incremental core), ``_fast`` (raw-attribute parser), ``_columns``/``_attr_columns``/``_header_columns``
(decoded spans -> columns), ``_decode_errors``, ``_interner``, ``_pieces``/``_workers`` (the parallel read's
parts and processes). Write side: ``write`` (``write_otlp_jsonl``), ``write_block`` (column-wise span texts),
``write_split`` (a second process for big writes), ``plan`` (which rows go where, under which ids; shared
with ``readback``, the Timeline a read of a written file gives, computed without reading it) and ``convert``
(the import: another format's file -> an OTLP JSONL file and its cache entry).

Importing this package imports none of them (the format table loads them by name).
"""
