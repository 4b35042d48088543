#!/bin/bash
# The "network that thinks" trainings and their measurement (docs/results.md), back to back: one process,
# one thread. Run from the repository root: nohup bash bench/think_queue.sh > runs/LOG 2>&1 &
export OMP_NUM_THREADS=1 PONDER_DATA=${PONDER_DATA:-/work/shared/data}
while [ -n "$WAIT_FOR" ] && kill -0 "$WAIT_FOR" 2>/dev/null; do sleep 5; done     # an earlier queue's last process
R="--seeds 0,1,2,3,4 --reader recall --max-steps 8 --lr 3e-3 --epochs 0.6 --answer-loss mean --lambda-p 0.2"
measure() { python -m bench.think_measure "runs/$1" --json "runs/$1/measure.json" > "runs/$1/measure.txt" 2>&1; }
[ -f runs/recall-ds-exit/measure.json ] || { python -m ponder sweep --out runs/recall-ds-exit $R --halting-loss exit --beta 0 && measure recall-ds-exit; }
[ -f runs/recall-ds-exit-conf/measure.json ] || { python -m ponder sweep --out runs/recall-ds-exit-conf $R \
    --halting-loss exit --beta 0 --lambda-input confidence && measure recall-ds-exit-conf; }
[ -f runs/recall-ds-kl/measure.json ] || { python -m ponder sweep --out runs/recall-ds-kl $R --halting-loss ce \
    --regulariser kl --beta 0.01 && measure recall-ds-kl; }
python -m ponder sweep --out runs/rows-ds-exit --seeds 0,1,2,3,4 --reader rows --epochs 1 --answer-loss mean \
    --halting-loss exit --beta 0 --lambda-p 0.2 --lambda-input confidence && measure rows-ds-exit
python -m ponder sweep --out runs/recall-ds-exit-conf-e2 ${R/--epochs 0.6/--epochs 2} --halting-loss exit --beta 0 \
    --lambda-input confidence && measure recall-ds-exit-conf-e2
python -m ponder sweep --out runs/recall-ds-acc $R --halting-loss accuracy --step-cost 0.002 --beta 0 && measure recall-ds-acc
echo QUEUE DONE
