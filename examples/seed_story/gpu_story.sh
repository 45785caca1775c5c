#!/usr/bin/env bash
# The seed's story on one GPU at scale, in one device call (README.md, "The fast GPU path at 2^22, one H200").
#
#   bash examples/seed_story/gpu_story.sh [OUT] [LOGN] [BATCH] [DEADLINE_S]
#
# Five "optimisations" of the fast GPU path (b1 pinning per proof, pageable key uploads, b_g2 batched at the end, a
# sync after every MSM, the seed's first D4 window rule) and the null control, as a half-fraction factorial (32
# variants), CUDA activity on, rounds interleaved and shuffled, keys generated on the GPU by the first (prime) run.
# --deadline stops starting runs in time, so the analysis, the per-round replicates and the traces always come back.
# `reload` (keys re-read per proof) is found at any N and its ~11 s runs fill the call: SWITCHES adds it back.
set -u
OUT=${1:-seed-story-gpu}
LOGN=${2:-22}
BATCH=${3:-4}
DEADLINE=${4:-420}
PYTHON=${PYTHON:-python3}
SWITCHES=${SWITCHES:-b1,pageable,syncmsm,windows,g2end,null}
RUNS=${RUNS:-10}            # rounds of the design (each a complete replicate); --deadline ends it sooner
BACKEND=${BACKEND:-cuda}   # BACKEND=cpu: a dry run of the same pipeline on a machine without a GPU (the switches
                           # then act only where the CPU backend has the code path: b1, d4, null)
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
"$PYTHON" -m gputrace ab --switches "$SWITCHES" --design factorial --fraction half \
    --runs "$RUNS" --prime 1 --warmup 0 --shuffle --cuda-activity --deadline "$DEADLINE" --backend "$BACKEND" \
    --constraints "2^$LOGN" --batch "$BATCH" --key-dir "$OUT/keys" --out "$OUT/experiment" \
    > "$OUT/ab.txt" 2> "$OUT/ab.log"
echo "gputrace ab exit $? ($SECONDS s)"
"$PYTHON" "$HERE/replicates.py" "$OUT/experiment" --expect b1=pin,unpin --expect reload=load_bases,sync \
    --expect pageable=load_bases --expect syncmsm=sync --expect windows=msm_a,msm_b_g1,msm_l --expect g2end=b_g2,sync \
    --null null \
    --json "$OUT/replicates.json" > "$OUT/replicates.md"
echo "replicates exit $? ($SECONDS s)"
[ "${TARBALL:-1}" = 1 ] && tar czf "$OUT/traces.tgz" --exclude keys --exclude proofs -C "$OUT" experiment   # TARBALL=0: none
head -60 "$OUT/ab.txt"
cat "$OUT/replicates.md"
