#!/bin/bash
# The "network that thinks" trainings and their measurement (docs/findings.md §10), back to back: one process,
# one thread, lowest priority. Run from the repository root:
#     nohup bash bench/think_queue.sh > runs/LOG 2>&1 &                        every setting not yet measured
#     ONLY="recall-ds-exit-stab-mlp recall-ds-exit-conf-mlp" nohup bash bench/think_queue.sh > runs/LOG 2>&1 &
# A setting whose runs/NAME/measure.json exists is skipped. SEEDS (default 0,1,2,3,4) picks the seeds.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PONDER_DATA=${PONDER_DATA:-/work/shared/data}
while [ -n "$WAIT_FOR" ] && kill -0 "$WAIT_FOR" 2>/dev/null; do sleep 5; done     # an earlier queue's last process
SEEDS=${SEEDS:-0,1,2,3,4}
R="--seeds $SEEDS --reader recall --max-steps 8 --lr 3e-3 --epochs 0.6 --answer-loss mean --lambda-p 0.2"
E2=${R/--epochs 0.6/--epochs 2}
setting() {     # setting NAME ARGS...: train the seeds, then measure them (bench/think_measure.py)
    local name=$1; shift
    [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]] && return
    [ -f "runs/$name/measure.json" ] && return
    nice -n 19 python -m ponder sweep --out "runs/$name" "$@" && nice -n 19 python -m bench.think_measure \
        "runs/$name" --json "runs/$name/measure.json" > "runs/$name/measure.txt" 2>&1
}
setting recall-ds-exit $R --halting-loss exit --beta 0
setting recall-ds-exit-conf $R --halting-loss exit --beta 0 --lambda-input confidence
setting recall-ds-kl $R --halting-loss ce --regulariser kl --beta 0.01
setting rows-ds-exit --seeds "$SEEDS" --reader rows --epochs 1 --answer-loss mean --halting-loss exit --beta 0 \
    --lambda-p 0.2 --lambda-input confidence
setting recall-ds-exit-conf-e2 $E2 --halting-loss exit --beta 0 --lambda-input confidence
setting recall-ds-acc $R --halting-loss accuracy --step-cost 0.002 --beta 0
# accuracy minus compute kept off saturation by the mass-covering KL(p_G || p)
setting recall-ds-acc-klr $R --halting-loss accuracy --step-cost 0.002 --beta 0.01 --regulariser kl-reverse
# the exit target read by the features a confidence rule lacks, and a nonlinear head
setting recall-ds-exit-stab-mlp $R --halting-loss exit --beta 0 --lambda-input stability --lambda-head mlp
setting recall-ds-exit-conf-mlp $R --halting-loss exit --beta 0 --lambda-input confidence --lambda-head mlp
setting recall-ds-exit-stab $R --halting-loss exit --beta 0 --lambda-input stability
# accuracy minus compute after the answers trained alone for half the updates
setting recall-ds-acc-warm $R --halting-loss accuracy --step-cost 0.002 --beta 0 --halting-warmup 0.5
setting recall-ds-acc-warm-stab-mlp $R --halting-loss accuracy --step-cost 0.002 --beta 0 --halting-warmup 0.5 \
    --lambda-input stability --lambda-head mlp
# lambda_n from the features alone, the step's own head on h unread
setting recall-ds-exit-stab-mlponly $R --halting-loss exit --beta 0 --lambda-input stability --lambda-head mlp-only
setting recall-ds-exit-stab-mlp-e2 $E2 --halting-loss exit --beta 0 --lambda-input stability --lambda-head mlp
echo QUEUE DONE
