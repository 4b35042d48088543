"""Training: the loop (loop.train), one update (step), the CUDA-graph fast path (fastpath), the step forecast and
cancel flag (progress), one run from start to end (lifecycle.run: train, save, measure, record) and the peak memory
a run needs (memory)."""
