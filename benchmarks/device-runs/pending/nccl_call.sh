#!/usr/bin/env bash
# One device call for issue 24 (nvidia-h200-x2, carry .whl): a 2-rank NCCL job with a straggler under record,
# the report's straggler estimate against the ranks' truth (summary.py), and the GPU tests that need two GPUs.
# Leaves $OUT/nccl.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/nccl; mkdir -p $W
nvidia-smi -L | tee $W/gpus.txt
if command -v torchrun >/dev/null 2>&1; then TORCHRUN=(torchrun); else TORCHRUN=(python3 -m torch.distributed.run); fi
timeout 150 python3 -m gputrace record --trace $W/ddp.jsonl -- "${TORCHRUN[@]}" --standalone --nproc-per-node 2 \
    benchmarks/real_programs/ddp_slow_rank.py --backend nccl 2>&1 | tee $W/ddp-record.log | tail -8
timeout 60 python3 -m gputrace report $W/ddp.jsonl > $W/ddp-report.txt 2>&1; echo "report exit $?"
timeout 60 python3 -m gputrace report --json $W/ddp.jsonl > $W/ddp-report.json 2> $W/ddp-report.err
head -30 $W/ddp-report.txt | cut -c1-200
python3 benchmarks/real_programs/summary.py $W 2>&1 | grep -i ddp
timeout 200 python3 -m pytest -q -m gpu tests/gpu/test_cuda_backend.py tests/gpu/test_cuda_timing.py -p no:cacheprovider 2>&1 | tail -4
gzip -f $W/ddp.jsonl; tar czf $OUT/nccl.tgz -C /tmp nccl
