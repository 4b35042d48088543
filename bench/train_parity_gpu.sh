#!/usr/bin/env bash
# Parity runs on one GPU, in parallel processes (each is launch-bound, so they share the GPU well).
# Big batches cost the same time per step on a GPU here, so they use batch 1024.
set -u
OUT=${OUT:-results-gpu}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2   # several processes share the CPU cores
mkdir -p "$OUT"
SECS=${SECS:-420}
for preset in medium medium-extrapolation large paper extrapolation; do
  python -m ponder train --task parity --parity-preset $preset --hidden 128 --lr 1e-3 --batch-size 1024 \
    --epochs 1000 --steps-per-epoch 1000 --max-seconds $SECS --lr-schedule constant --quiet \
    --out "$OUT/parity/parity-$preset" > "$OUT/parity-$preset.log" 2>&1 &
done
wait
