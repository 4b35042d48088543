"""python -m bench <benchmark> [--quick] [--out PATH] ...   (python -m bench --help)

    throughput | time-to-accuracy | early-exit | latency | profile   the CPU benchmarks
    gpu                                                             CUDA only; a clear message without one
    all                                                             every CPU benchmark (+ gpu if CUDA), then report
    report                                                          docs/benchmarks.md from docs/bench/*.json

--quick runs a tiny smoke version in seconds; its JSON goes to a temporary folder unless --out is
given, so it never replaces the measured figures in docs/bench/.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import common

NAMES = ("throughput", "time-to-accuracy", "early-exit", "latency", "profile", "gpu")
CPU_NAMES = NAMES[:-1]
CONFIGS = {"throughput": "ThroughputConfig", "time-to-accuracy": "TimeToAccuracyConfig",
           "early-exit": "EarlyExitConfig", "latency": "LatencyConfig", "profile": "ProfileConfig",
           "gpu": "GpuConfig"}


def _module(name: str):
    from . import early_exit, gpu, latency, profiling, throughput, time_to_accuracy
    return {"throughput": throughput, "time-to-accuracy": time_to_accuracy, "early-exit": early_exit,
            "latency": latency, "profile": profiling, "gpu": gpu}[name]


def make_config(name: str, args):
    """The benchmark's dataclass config: its defaults (or --quick ones) with the command-line overrides."""
    cls = getattr(_module(name), CONFIGS[name])
    over = {}
    if getattr(args, "threads", None) and name != "gpu":
        over["threads"] = args.threads
    if name == "early-exit" and getattr(args, "cpu_time", False):
        over["clock"] = "cpu"
    if name == "early-exit" and getattr(args, "repeats", None) is not None:
        over["repeats"] = args.repeats
    if name == "early-exit" and getattr(args, "batch_sizes", None):
        over["batch_sizes"] = tuple(int(b) for b in args.batch_sizes.split(","))
    if name == "early-exit" and getattr(args, "single_images", None) is not None:
        over["single_images"] = args.single_images
    if name == "early-exit" and getattr(args, "models", None):
        over.update(models=tuple(args.models.split(",")), synthetic_steps=None)
    if name == "throughput":
        for k in ("rounds", "steps", "warm", "reference_steps"):
            if getattr(args, k, None) is not None:
                over[k] = getattr(args, k)
        if getattr(args, "compile", False):
            over["compile"] = True
    if name == "gpu":
        for k in ("device", "batch_size", "lr", "epochs", "max_seconds"):
            if getattr(args, k, None) is not None:
                over[k] = getattr(args, k)
        if getattr(args, "compile", False):
            over["compile"] = True
    return cls.quick(**over) if args.quick else cls(**over)


def run_one(name: str, args, out=None, mnist=None):
    mod = _module(name)
    cfg = make_config(name, args)
    print(f"== {name}{' (quick)' if args.quick else ''}")
    return mod.run(cfg, mnist=mnist, data_dir=args.data_dir, out=out, quick=args.quick)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common_args(p, out_help="JSON file to write (default docs/bench/<name>.json)"):
        p.add_argument("--quick", action="store_true", help="a tiny smoke run (seconds); JSON to a temporary folder")
        p.add_argument("--out", type=Path, help=out_help)
        p.add_argument("--threads", type=int, help="torch intra-op threads (default: one per core, at most 8)")
        p.add_argument("--data-dir", help="MNIST folder (default $PONDER_DATA or ./data)")

    for name in NAMES:
        p = sub.add_parser(name, help=_module(name).__doc__.strip().splitlines()[0].replace("%", "%%"))
        common_args(p)
        if name == "throughput":
            p.add_argument("--rounds", type=int, help="repeat the variant sequence; each keeps its best round")
            p.add_argument("--steps", type=int, help="timed steps per variant")
            p.add_argument("--warm", type=int, help="untimed steps first")
            p.add_argument("--reference-steps", type=int, help="timed steps for the slow reference (b)")
            p.add_argument("--compile", action="store_true", help="also time (a) with torch.compile")
        if name == "early-exit":
            p.add_argument("--cpu-time", action="store_true", help="time by the process's CPU time, not the wall's "
                           "(use with --threads 1 where other work keeps the cores busy)")
            p.add_argument("--repeats", type=int, help="timed repeats of each job, the best kept (default 2)")
            p.add_argument("--models", help="comma-separated shipped models to time (default: every one, and the "
                           "mnist-default stand-in halting at ~10 steps, which a list leaves out)")
            p.add_argument("--batch-sizes", help="comma-separated images per ponder() call (default 10000,1000,1; "
                           "the first judges the target)")
            p.add_argument("--single-images", type=int, help="images timed at batch size 1, one call each (default 100)")
        if name == "gpu":
            p.add_argument("--device", help="cuda (default) or cuda:N; cpu only smoke-tests this code")
            p.add_argument("--batch-size", type=int, help="time to accuracy: batch size (default 128)")
            p.add_argument("--lr", type=float, help="time to accuracy: learning rate (default 2e-3)")
            p.add_argument("--epochs", type=float, help="time to accuracy: epochs (default 5)")
            p.add_argument("--max-seconds", type=float, help="time to accuracy: a time budget")
            p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p = sub.add_parser("all", help="every CPU benchmark (and gpu where CUDA is available), then report")
    common_args(p, out_help="folder for the JSON files (default docs/bench/)")
    p.add_argument("--no-report", action="store_true", help="do not render docs/benchmarks.md afterwards")
    p = sub.add_parser("report", help="render docs/benchmarks.md from the JSON files")
    p.add_argument("--results-dir", type=Path, default=common.RESULTS_DIR)
    p.add_argument("--doc", type=Path, default=common.DOC_PATH)
    args = ap.parse_args(argv)

    if args.cmd == "report":
        from .report import write_report
        write_report(args.results_dir, args.doc)
        return 0
    if args.cmd == "gpu":
        from .gpu import NoGpu, check_device
        try:
            check_device(make_config("gpu", args).device)
            run_one("gpu", args, args.out)
        except NoGpu as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    if args.cmd in CPU_NAMES:
        run_one(args.cmd, args, args.out)
        return 0

    # all: one process, MNIST loaded once, the benchmarks one after the other
    import torch
    folder = args.out or (common.QUICK_DIR if args.quick else common.RESULTS_DIR)
    mnist = common.load_mnist(args.data_dir)
    names = list(CPU_NAMES) + (["gpu"] if torch.cuda.is_available() else [])
    if "gpu" not in names:
        print("gpu: skipped (no CUDA GPU here)")
    for name in names:
        run_one(name, args, Path(folder) / f"{name.replace('-', '_')}.json", mnist=mnist)
    if not args.no_report and not args.quick:
        from .report import write_report
        write_report(Path(folder), common.DOC_PATH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
