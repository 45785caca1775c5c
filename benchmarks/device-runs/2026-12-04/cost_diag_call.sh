#!/usr/bin/env bash
# Device call 1 of 2026-12-04 (nvidia-h200, carry .whl): issue 33's cost of record on a launch-bound step.
# Prediction: record's extra time per step is GIL time taken from the launching thread by CUPTI record conversion
# (CUPTI's worker thread) and span export (the exporter thread): their CPU time per step ~ (record - plain) step
# time, and py-spy --gil shows cupti_convert/_completed and the exporter holding the GIL; record-host (no CUPTI)
# close to plain. Leaves $OUT/cost-diag.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 PATH=/tmp/site/bin:$PATH
W=/tmp/cost-diag; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader; nproc; uptime
P=benchmarks/real_programs
el "thread cpu"
python3 -m gputrace record --trace $W/tc.jsonl -- python3 $P/cnn_step.py --steps 2000 --thread-cpu > $W/thread_cpu_record.txt 2>&1
python3 $P/cnn_step.py --steps 2000 --thread-cpu > $W/thread_cpu_plain.txt 2>&1
tail -12 $W/thread_cpu_record.txt; tail -3 $W/thread_cpu_plain.txt
el "py-spy gil"
timeout 120 py-spy record --gil --subprocesses --format raw -r 400 -o $W/pyspy_gil.txt -- python3 -m gputrace record --trace $W/ps.jsonl -- python3 $P/cnn_step.py --steps 3000 > $W/pyspy_gil.log 2>&1; echo "py-spy exit $?"
timeout 120 py-spy record --subprocesses --format raw -r 400 -o $W/pyspy_all.txt -- python3 -m gputrace record --trace $W/ps2.jsonl -- python3 $P/cnn_step.py --steps 3000 > $W/pyspy_all.log 2>&1; echo "py-spy exit $?"
tail -2 $W/pyspy_gil.log
el "whole-process rounds"
ls -d /opt/nvidia/* /opt/nvidia/*/* 2>/dev/null | head; export PATH=$PATH:$(dirname $(ls /opt/nvidia/*/bin/nsys /opt/nvidia/*/*/bin/nsys /opt/nvidia/*/*/*/bin/nsys 2>/dev/null | head -1) 2>/dev/null); which nsys
timeout 300 python3 $P/bench_whole_process.py --rounds 5 --modes plain,record,record-host,nsys,profiler -- --steps 300 --warmup 30 2>&1 | tee $W/whole.txt | tail -12
el "pack"
rm -f $W/*.jsonl $W/*.nsys-rep
tar czf $OUT/cost-diag.tgz -C /tmp cost-diag
