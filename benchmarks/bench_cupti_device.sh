#!/bin/bash
# Everything the CUDA-activity work measures on the GPU machine, in one call (device tool: carry [".whl"]).
# Writes logs and fixtures under $OUT (default ./cupti-out). Usage: bash benchmarks/bench_cupti_device.sh [LOGN] [REPEATS]
OUT=${OUT:-cupti-out}; LOGN=${1:-16}; REP=${2:-2}; ROOT=$PWD
mkdir -p "$OUT/fx"; export PYTHONUNBUFFERED=1
log() { echo "=== $*" | tee -a "$OUT/all.log"; }
log probe; python3 -c "from cupti import cupti as c; print('cupti', c.get_timestamp())" 2>&1 | tee -a "$OUT/all.log"
nvidia-smi -L 2>&1 | tee -a "$OUT/all.log"
log fixture; timeout 60 python3 benchmarks/bench_cupti.py fixture --out "$OUT/fx" 2>&1 | tee -a "$OUT/all.log"
log gpu tests; timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cupti.py -s 2>&1 | tee -a "$OUT/all.log" | tail -30
log record torch; (cd /tmp && GPUTRACE_CUPTI_DUMP="$OUT/fx/torch_records.jsonl" timeout 90 python3 -m gputrace record \
  --trace "$OUT/torch.jsonl" -- python3 "$ROOT/examples/record_torch_step.py" 2) 2>&1 | tee -a "$OUT/all.log"
log record cupy; (cd /tmp && timeout 60 python3 -m gputrace record --trace "$OUT/cupy.jsonl" -- python3 "$ROOT/examples/record_cupy.py") 2>&1 | tee -a "$OUT/all.log"
log report torch; timeout 60 python3 -m gputrace report "$OUT/torch.jsonl" 2>&1 | head -40 | tee -a "$OUT/all.log"
log tracer hot path; for c in file+nvtx file+nvtx+cupti cuda cuda+cupti; do
  case $c in *cupti) A=1;; *) A=0;; esac
  GPUTRACE_CUDA_ACTIVITY=$A timeout 60 python3 benchmarks/bench_tracer.py --child $c -n 20000 --repeats 7 2>&1 | tail -1 | tee -a "$OUT/all.log"
done
log proof; timeout ${PROOF_TIMEOUT:-240} python3 benchmarks/bench_cupti.py proof --logn "$LOGN" --repeats "$REP" --keys /tmp/gk --json "$OUT/bench.json" 2>&1 | tee -a "$OUT/all.log"
log done
