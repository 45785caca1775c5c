#!/usr/bin/env bash
# final device call: the GPU test suite on merged main, the host path at 2^20, the real programs under record
set -u
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout -s INT -k 10 170 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -ra --durations=8 > $OUT/gpu_pytest.log 2>&1
echo "gpu pytest rc=$? at $(( $(date +%s) - t0 )) s"; tail -22 $OUT/gpu_pytest.log
( timeout -s INT -k 5 50 python3 -m gputrace prove --backend cuda --synthesis host --b-g2 host --constraints 2^20 \
    --trace /tmp/host.jsonl --key-dir /tmp/hk --out /tmp/hout; echo "host prove rc=$?";
  timeout 20 python3 -m gputrace report /tmp/host.jsonl ) > $OUT/host-report.txt 2>&1
echo "host path at $(( $(date +%s) - t0 )) s"; grep -E "proofs|rc=|b_g2|synthesis|load_bases|sync " $OUT/host-report.txt | head -14
STEPS=15 REPEATS=3 timeout -s INT -k 10 180 bash benchmarks/real_programs/run_all.sh $OUT/real > /dev/null 2>&1
echo "real rc=$? at $(( $(date +%s) - t0 )) s"; cat $OUT/real/summary.txt 2>/dev/null; tail -3 $OUT/real/run_all.log
echo "total $(( $(date +%s) - t0 )) s"
