#!/usr/bin/env bash
# Device call F1 of 2026-12-04 (nvidia-h200, carry .whl): the whole GPU suite on the merged main, then issue 32's
# DDP target on the GPU: ddp_plain.py (DDP, gloo, 2 ranks on one H200, DataLoader workers, rank 1's input 50 ms
# late, no ranges, no gputrace import) under record -- torchrun; then cnn_step.py under record (steps, warm-up).
# Prediction: the report's first finding names rank 1 as the straggler, the line in load_batch, and rank 0's wait
# per step within 10 % of (rank 0 backward_median_ms - rank 1 backward_median_ms). Leaves $OUT/final.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=120 PATH=/tmp/site/bin:$PATH
W=/tmp/final; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
P=benchmarks/real_programs
el "ddp_plain under record"
( cd $P && timeout 150 python3 -m gputrace record --trace $W/ddp.jsonl -- torchrun --standalone --nproc-per-node 2 \
    ddp_plain.py --steps 20 > $W/ddp_run.txt 2>&1; echo "record exit $?" )
grep -h "DDP_PLAIN\|^trace:" $W/ddp_run.txt
timeout 120 python3 -m gputrace report $W/ddp.jsonl > $W/ddp_report.txt 2>&1; echo "report exit $?"
timeout 120 python3 -m gputrace report --json $W/ddp.jsonl > $W/ddp_report.json 2>$W/ddp_report_json.err
sed -n '/Findings/,/^$/p' $W/ddp_report.txt | head -40
el "cnn_step under record"
timeout 120 python3 -m gputrace record --trace $W/cnn.jsonl -- python3 $P/cnn_step.py --steps 200 > $W/cnn_run.txt 2>&1; echo "record exit $?"
tail -2 $W/cnn_run.txt
timeout 120 python3 -m gputrace report $W/cnn.jsonl > $W/cnn_report.txt 2>&1; echo "report exit $?"
sed -n '/Findings/,/^$/p' $W/cnn_report.txt | head -30; grep -A8 -i "^steps" $W/cnn_report.txt | head -12
timeout 120 python3 benchmarks/bench_steady_cut.py $W/cnn.jsonl $W/ddp.jsonl > $W/steady_cut.txt 2>&1; tail -6 $W/steady_cut.txt
el "gpu suite"
timeout 330 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider > $W/gpu_pytest.txt 2>&1; echo "pytest exit $?"
tail -4 $W/gpu_pytest.txt | cut -c1-300
el "pack"
gzip -f $W/*.jsonl; ls -la $W
tar czf $OUT/final.tgz -C /tmp final
