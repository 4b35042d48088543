#!/usr/bin/env bash
# Train every shipped model (assets/) with the project's own CLI, in parallel processes on one GPU.
# Usage: OUT=dir PONDER_DATA=dir bash bench/train_assets.sh
# The models land in $OUT/r-*/models/<name>/; copy them to assets/ and run
# `python -m ponder reproduce --from-assets` to re-measure their cards on this machine.
set -u
OUT=${OUT:-results-gpu}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2   # several processes share the CPU cores
mkdir -p "$OUT"
nvidia-smi -L 2>/dev/null || true
MNIST=mnist-default,mnist-rot22,sweep-lp0.1,sweep-lp0.2,sweep-lp0.3,sweep-lp0.5,sweep-lp0.7,sweep-lp0.9
python -m ponder reproduce --out "$OUT/r-mnist" --only "$MNIST" > "$OUT/mnist.log" 2>&1 &
python -m ponder reproduce --out "$OUT/r-pp" --only parity-paper > "$OUT/parity-paper.log" 2>&1 &
python -m ponder reproduce --out "$OUT/r-px" --only parity-extrapolation > "$OUT/parity-extra.log" 2>&1 &
# a second learning rate for the paper's parity setting (parity is sensitive to it)
python -m ponder train --task parity --parity-preset paper --hidden 128 --lr 1e-3 --batch-size 256 \
  --epochs 1000 --steps-per-epoch 1000 --max-seconds 400 --lr-schedule constant --quiet \
  --out "$OUT/r-ppb/models/parity-paper-lr1e-3" > "$OUT/parity-paper-b.log" 2>&1 &
wait
