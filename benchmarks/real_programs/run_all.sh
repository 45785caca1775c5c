#!/bin/bash
# Runs the real programs of this folder under gputrace and leaves at most 6 files in OUTDIR:
#   run_all.log        everything every step printed (tee'd)
#   summary.txt        the 10-line summary (also printed last)
#   train-report.txt   gputrace report of the recorded training loop
#   ddp-report.txt     gputrace report of the recorded 2-rank torchrun job (straggler: rank 1)
#   cupy-report.txt    gputrace report of examples/record_cupy.py (only when that example exists)
#   traces.tar.gz      the traces (record JSONL, the bench's last Kineto JSON), report --json, per-step logs
# Usage, from anywhere (the repo root is found from this file):  bash benchmarks/real_programs/run_all.sh OUTDIR
# Environment: PYTHON (default python3) must import torch; gputrace is imported from this checkout (the repo
# root goes first on PYTHONPATH; its dependencies must already be importable). STEPS (bench steps, default 30),
# REPEATS (default 3). Each step has a timeout; a step that fails is reported and the next one runs.
set -u
OUTDIR=${1:?usage: run_all.sh OUTDIR}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
STEPS=${STEPS:-30}
REPEATS=${REPEATS:-3}
W=$(mktemp -d /tmp/gputrace-real.XXXXXX)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-160}
cd "$REPO" || exit 1
GT=("$PY" -m gputrace)
if command -v torchrun >/dev/null 2>&1; then TORCHRUN=(torchrun); else TORCHRUN=("$PY" -m torch.distributed.run); fi
exec 3>&1 > >(tee -a "$OUTDIR/run_all.log") 2>&1
TEE_PID=$!
T0=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - T0 )) s) ==="; }

step env
"$PY" - <<'EOF' | tee "$W/env.txt"
import torch, importlib.util as u
dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
print(f"torch {torch.__version__} cuda {torch.version.cuda} device {dev} cupti-python {bool(u.find_spec('cupti'))} "
      f"cupy {bool(u.find_spec('cupy'))}")
EOF

step "(a) record overhead: plain vs gputrace record vs torch.profiler, $STEPS steps x $REPEATS repeats"
timeout 150 "$PY" benchmarks/real_programs/bench_record_overhead.py --steps "$STEPS" --repeats "$REPEATS" \
  --budget-s 100 --work "$W/bench" --json "$W/bench.json" 2>&1 | tee "$W/bench.log"
echo "bench exit ${PIPESTATUS[0]}"

step "(b) gputrace record -- python train_step.py --steps 20"
timeout 90 "${GT[@]}" record --trace "$W/train.jsonl" -- "$PY" benchmarks/real_programs/train_step.py --steps 20 \
  2>&1 | tee "$W/train-record.log"
echo "record exit ${PIPESTATUS[0]}"
timeout 60 "${GT[@]}" report "$W/train.jsonl" > "$OUTDIR/train-report.txt" 2>&1; echo "report exit $?"
timeout 60 "${GT[@]}" report --json "$W/train.jsonl" > "$W/train-report.json" 2>"$W/train-report.err"
head -40 "$OUTDIR/train-report.txt"

step "(c) gputrace record -- torchrun --standalone --nproc-per-node 2 ddp_slow_rank.py"
timeout 120 "${GT[@]}" record --trace "$W/ddp.jsonl" -- "${TORCHRUN[@]}" --standalone --nproc-per-node 2 \
  benchmarks/real_programs/ddp_slow_rank.py 2>&1 | tee "$W/ddp-record.log"
echo "record exit ${PIPESTATUS[0]}"
timeout 60 "${GT[@]}" report "$W/ddp.jsonl" > "$OUTDIR/ddp-report.txt" 2>&1; echo "report exit $?"
timeout 60 "${GT[@]}" report --json "$W/ddp.jsonl" > "$W/ddp-report.json" 2>"$W/ddp-report.err"
head -40 "$OUTDIR/ddp-report.txt"

if [ -f examples/record_cupy.py ]; then
  step "(d) gputrace record -- python examples/record_cupy.py"
  timeout 60 "${GT[@]}" record --trace "$W/cupy.jsonl" -- "$PY" examples/record_cupy.py 2>&1 | tee "$W/cupy-record.log"
  echo "record exit ${PIPESTATUS[0]}"
  timeout 60 "${GT[@]}" report "$W/cupy.jsonl" > "$OUTDIR/cupy-report.txt" 2>&1; echo "report exit $?"
  timeout 60 "${GT[@]}" report --json "$W/cupy.jsonl" > "$W/cupy-report.json" 2>"$W/cupy-report.err"
  head -30 "$OUTDIR/cupy-report.txt"
fi

step "traces -> $OUTDIR/traces.tar.gz"
tar -czf "$OUTDIR/traces.tar.gz" -C "$W" --exclude='*.err' . && ls -la "$OUTDIR"

step "summary ($(( $(date +%s) - T0 )) s in all)"
"$PY" benchmarks/real_programs/summary.py "$W" | tee "$OUTDIR/summary.txt"
rm -rf "$W"
exec >&3 2>&3  # close the pipe to tee and wait for it, so run_all.log is complete when the script returns
wait "$TEE_PID" 2>/dev/null || true
