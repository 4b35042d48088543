"""Benchmarks for the ponder project: run by hand, `python -m bench <name>` (see bench/__main__.py).

Not part of the test suite (tests/test_bench_smoke.py only runs each one in --quick mode).
Each benchmark prints a table and writes a JSON file to docs/bench/<name>.json;
`python -m bench report` renders docs/benchmarks.md from those files.

    throughput        train images/s: project default, article-style reference, same sizes, classifier
    time-to-accuracy  seconds of CPU training to 98.5% test accuracy with the explorer's quick-run settings
    early-exit        per-sample early exit vs the full N-step unroll, whole and recurrent part
    latency           explorer: 280x280 canvas -> per-step figures, p50 / p95
    profile           where a training step's time goes (phases, torch.profiler top operators)
    gpu               time to 99% and images/s on a CUDA GPU (exits with a message without one)
"""
