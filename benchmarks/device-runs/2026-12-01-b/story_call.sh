#!/usr/bin/env bash
# One device call: the seed story at 2^22, batch 4, the five switches without `reload` plus the null control,
# CUPTI on (pyelftools travels with the wheels: without it cupti-python does not import and CUDA activity is off).
# Usage (device tool, carry .whl):  bash benchmarks/device-runs/2026-12-01-b/story_call.sh [DEADLINE_S]
# Leaves in $OUT: results.tgz (ab.txt, ab.json, ab.log, replicates.md/.json, story.log, gpu.txt) and the
# experiment's traces as traces.txz.part-aa, -ab, ... (15 MB pieces; `cat traces.txz.part-* | tar xJf -`).
set -u
DEADLINE=${1:-380}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import elftools, cupti.cupti; print('cupti-python imports')" || exit 4
R=/tmp/results; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $R/gpu.txt
start=$(date +%s)
TARBALL=0 RUNS=10 SWITCHES=b1,pageable,syncmsm,windows,g2end,null timeout -s INT -k 20 $((DEADLINE + 150)) \
    bash examples/seed_story/gpu_story.sh /tmp/story 22 4 "$DEADLINE" > $R/story.log 2>&1
echo "story wall $(( $(date +%s) - start )) s" | tee -a $R/story.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee -a $R/gpu.txt
timeout 45 python3 -m gputrace ab --analyze /tmp/story/experiment --json > $R/ab.json 2>/dev/null
for f in ab.txt ab.log replicates.md replicates.json; do cp /tmp/story/$f $R/ 2>/dev/null; done
tar czf $OUT/results.tgz -C /tmp results
tar cf - --exclude keys --exclude proofs -C /tmp/story experiment | xz -T0 -6 > /tmp/traces.txz
split -b 15000000 /tmp/traces.txz $OUT/traces.txz.part-
ls -la $OUT
tail -5 $R/story.log; head -12 $R/ab.txt; cat $R/replicates.md
