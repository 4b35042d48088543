"""Command line: python -m ponder {train, evaluate, reproduce} --help"""
from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
from dataclasses import fields

from .store.card import two_decimals
from .config import DEVICES, MAX_SEED, REGULARISERS, ConfigError, TrainConfig
from .tasks import TASKS, get_task
from .tasks.mnist import MNIST_READERS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _floats(s: str):
    try:
        vals = [float(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None
    if not all(math.isfinite(v) and -360.0 <= v <= 360.0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected angles in [-360, 360] degrees, got {s!r}")
    return vals


def _ranges(s: str):
    vals = _floats(s)
    if not all(0.0 <= v <= 180.0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected ranges in [0, 180] degrees, got {s!r}")
    return vals


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {s!r}")
    return v


MAX_EVAL_ITEMS = 1_000_000      # --limit: parity draws that many problems (10,000 by default; ~30 MB at n = 30)


def _eval_items(s: str) -> int:
    v = _positive_int(s)
    if v > MAX_EVAL_ITEMS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_EVAL_ITEMS:,} test items, got {s!r}")
    return v


def _seed(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {s!r}") from None
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"seed must be an integer in [0, 2**63 - 1], got {s!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    p = _Parser(prog="python -m ponder", description="PonderNet: train, evaluate and reproduce.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("train", help="train a PonderNet and save a run folder")
    t.add_argument("--task", default=d.task, help=f"one of {', '.join(TASKS)} (default {d.task})")
    t.add_argument("--out", required=True, help="run folder to write (model.safetensors, run.json, metrics.jsonl); "
                                                "a folder that already holds a run is refused unless --overwrite")
    t.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    add_config_flags(t, d)
    t.add_argument("--no-eval", action="store_true", help="skip the test-set evaluation after training")
    t.add_argument("--quiet", action="store_true", help="no progress bar")

    w = sub.add_parser("sweep", help="train a grid of configs x seeds, each trial a run folder (local or on Ray)")
    w.add_argument("--task", default=d.task, help=f"one of {', '.join(TASKS)} (default {d.task})")
    w.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2",
                   help="a config field and its values, e.g. lambda_p=0.1,0.5,0.9 (repeat for more fields; "
                        "the sweep is their cartesian product)")
    w.add_argument("--seeds", default="0", help="comma-separated seeds, each grid point once per seed (default 0)")
    w.add_argument("--out", required=True, help="sweep folder: a run folder per trial, sweep.json and sweep.md")
    w.add_argument("--backend", default="local", choices=("local", "ray"),
                   help="local: one trial after the other here; ray: Ray tasks on a local Ray or a cluster")
    w.add_argument("--address", default=None, help="ray: a running cluster's address (default: start a local Ray)")
    w.add_argument("--cpus-per-trial", type=float, default=1.0, help="ray: CPUs each trial holds (default 1)")
    w.add_argument("--gpus-per-trial", type=float, default=0.0,
                   help="ray: GPUs each trial holds; a fraction packs several trials on one GPU (default 0)")
    add_config_flags(w, d)

    e = sub.add_parser("evaluate", help="evaluate a run folder on the test set")
    e.add_argument("run", help="run folder (or assets/<model>)")
    e.add_argument("--data-dir", default=None, help="MNIST root holding MNIST/raw")
    e.add_argument("--rotations", type=_floats, default=[], help="fixed angles, e.g. 0,22.5,45,67.5,90")
    e.add_argument("--uniform", type=_ranges, default=[], help="uniform ranges +-d, e.g. 22.5,45")
    e.add_argument("--mode", default="sample", choices=["sample", "deterministic", "expected"])
    e.add_argument("--limit", type=_eval_items, default=None,
                   help=f"only the first N test items (MNIST; parity draws N problems), at most {MAX_EVAL_ITEMS:,}")
    e.add_argument("--seed", type=_seed, default=0, help="seed of the halting draws in 'sample' mode")
    e.add_argument("--device", default="auto", choices=DEVICES)
    e.add_argument("--json", action="store_true", help="print one JSON object")

    r = sub.add_parser("reproduce", help="retrain or re-evaluate the shipped models; write results.md/json")
    r.add_argument("--quick", action="store_true", help="small settings, under 5 minutes on 2 CPU cores")
    r.add_argument("--from-assets", action="store_true", help="only re-evaluate the models in assets/")
    r.add_argument("--out", default="results", help="output folder (default results)")
    r.add_argument("--data-dir", default=None)
    r.add_argument("--device", default="auto", choices=DEVICES)
    r.add_argument("--only", default=None, help="comma-separated model names (default: all)")
    return p


def add_config_flags(t: argparse.ArgumentParser, d: TrainConfig) -> None:
    """The training-config flags `train` and `sweep` share (each flag defaults to None: not given)."""
    t.add_argument("--data-dir", default=None, help="MNIST root holding MNIST/raw (default $PONDER_DATA or ./data)")
    t.add_argument("--epochs", type=float, default=None, help=f"passes over the training set, or steps-per-epoch "
                   f"batches of a task that generates its data (default: {defaults('epochs')})")
    t.add_argument("--max-seconds", type=float, default=None, help="time budget; stops cleanly when used")
    t.add_argument("--lambda-p", type=float, default=d.lambda_p, help=f"prior lambda_p in (0, 1] (default {d.lambda_p})")
    t.add_argument("--beta", type=float, default=d.beta, help=f"regulariser weight (default {d.beta})")
    t.add_argument("--regulariser", default=None, choices=REGULARISERS,
                   help="kl: KL(p || p_G), the paper's direction; kl-reverse: KL(p_G || p), the prior first "
                        f"(default: {defaults('regulariser')})")
    t.add_argument("--reader", default=None, choices=MNIST_READERS,
                   help="MNIST step function: cnn (whole image every step), rows (rows_per_step more rows each step), "
                        f"coarse (growing resolution) (default {d.reader})")
    t.add_argument("--rows-per-step", type=int, default=None, help=f"rows reader: image rows per step (default {d.rows_per_step})")
    t.add_argument("--max-steps", type=int, default=d.max_steps, help=f"N, most pondering steps (default {d.max_steps})")
    t.add_argument("--hidden", type=int, default=None, help=f"GRU hidden size (default: {defaults('hidden')})")
    t.add_argument("--batch-size", type=int, default=None, help=f"(default {d.batch_size})")
    t.add_argument("--lr", type=float, default=None, help=f"Adam learning rate (default: {defaults('lr')})")
    t.add_argument("--lr-schedule", default=d.lr_schedule, help="onecycle or constant")
    t.add_argument("--rotate-train", type=float, default=d.rotate_train, help="rotate training images by U(-d, d) degrees")
    t.add_argument("--parity-preset", default=d.parity_preset,
                   help=f"one of {', '.join(p for task in TASKS.values() for p in task.presets)}")
    t.add_argument("--steps-per-epoch", type=int, default=d.steps_per_epoch, help="parity: batches per epoch")
    t.add_argument("--seed", type=_seed, default=None, help=f"(default {d.seed})")
    t.add_argument("--device", default=d.device, help="auto, cpu, cuda or mps")
    t.add_argument("--compile", action="store_true", help="torch.compile the model (GPU)")


def defaults(name: str) -> str:
    """A TrainConfig field's default for each task, e.g. 'kl for mnist, kl-reverse for parity'."""
    def show(v):
        return f"{v:g}" if isinstance(v, float) else str(v)
    return ", ".join(f"{show(getattr(TrainConfig.for_task(t), name))} for {t}" for t in TASKS)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "evaluate":
            return cmd_evaluate(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "reproduce":
            from .reproduce import run as reproduce
            return reproduce(quick=args.quick, from_assets=args.from_assets, out=args.out,
                             data_dir=args.data_dir, device=args.device,
                             only=[n.strip() for n in args.only.split(",") if n.strip()] if args.only is not None else None)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # known failures get one line; see _one_line
        msg = _one_line(e)
        if msg is None:
            raise
        print(f"ponder: error: {msg}", file=sys.stderr)
        return 1
    return 0


def _one_line(e: Exception):
    from .store.atomic import SaveError
    from .store.card import CheckpointError
    from .data import DataError
    from .store.runs import RunNameError
    if isinstance(e, (ConfigError, CheckpointError, DataError, RunNameError, SaveError)):
        msg = str(e)
    elif isinstance(e, OSError):
        msg = f"{e.strerror or e} ({e.filename})" if getattr(e, "filename", None) else str(e)
    elif isinstance(e, RuntimeError) and "device" in str(e):
        msg = str(e)
    else:
        return None
    return " ".join(msg.split()) or e.__class__.__name__     # always one line


def config_from_args(args) -> TrainConfig:
    """Task defaults, then every flag the user gave (flags default to None = not given)."""
    names = {f.name for f in fields(TrainConfig)} - {"task"}
    given = {k: v for k, v in vars(args).items() if k in names and v is not None}
    return TrainConfig.for_task(args.task, **given).validate()


def cmd_train(args) -> int:
    from pathlib import Path

    from .store.atomic import check_writable, folder_lock
    from .store.card import CARD, WEIGHTS

    cfg = config_from_args(args)
    if not args.out.strip():
        raise ConfigError("--out must name a run folder, got an empty name")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    created = check_writable(out)             # fail before training, not after it
    with folder_lock(out):                    # one training per run folder, from the check to the card
        held = [f for f in (CARD, WEIGHTS) if (out / f).exists() or (out / f).is_symlink()]
        if held and not args.overwrite:
            _remove_if_empty(out, created)
            raise ConfigError(f"--out {out} already holds a run ({', '.join(held)}); pick another folder, or "
                              f"pass --overwrite to replace it")
        return _train_into(args, cfg, out, created)


def _train_into(args, cfg, out, created: bool) -> int:
    """cmd_train once --out is checked and locked: train, save, evaluate, report."""
    from tqdm import tqdm

    from . import lifecycle
    from .store.atomic import SaveError

    bar = None if args.quiet else tqdm(total=100, unit="%", bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

    def on_progress(p):
        if bar is None:
            return
        bar.n = round(100 * p.fraction_done(), 1)
        post = f"loss {p.loss:.3f} acc {p.accuracy:.3f} steps {p.mean_steps:.2f}"
        if p.val_accuracy is not None:
            post += f" val {p.val_accuracy:.4f}"
        bar.set_postfix_str(post, refresh=False)
        bar.refresh()

    from .memory import fit_message
    too_big = fit_message(cfg)
    if too_big:                               # a warning, not a refusal: the command line is the user's own machine
        print(f"ponder: warning: {too_big}", file=sys.stderr)
    cancel = threading.Event()
    try:
        with _ctrl_c_cancels(cancel):
            done = lifecycle.run(cfg, out, load_data=lambda: get_task(cfg.task).load_data(args.data_dir),
                                 callback=on_progress,
                                 cancel=cancel, evaluate=not args.no_eval, rescue=True)
    except SaveError as e:                    # the save and the fallback save both failed
        _remove_if_empty(out, created)
        print(f"ponder: error: {_one_line(e)}", file=sys.stderr)
        return 4
    except BaseException:
        _remove_if_empty(out, created)
        raise
    finally:
        if bar is not None:
            bar.close()
    res = done.result
    line = f"{res.status}: {res.steps} steps in {res.seconds:.1f} s on {res.device}"
    if res.reason:
        line += f" ({res.reason})"
    print(line)
    if done.saved_elsewhere:
        print(f"ponder: error: {done.saved_elsewhere}", file=sys.stderr)
    for problem in done.problems:
        print(f"ponder: warning: {problem}", file=sys.stderr)
    if done.metrics is not None:
        t = done.metrics
        print(f"test accuracy {t['accuracy']:.4f}, mean halting step {t['mean_steps']:.2f} "
              f"(median {t['median_steps']:.0f}, std {t['std_steps']:.2f}), mode {t['mode']}")
    if done.run_dir is None:
        _remove_if_empty(out, created)
        return 130
    print(f"saved {done.run_dir}")
    if done.saved_elsewhere:
        _remove_if_empty(out, created)
        return 4                    # saved, but not where asked
    return 0 if res.status != "failed" else 3


def _remove_if_empty(out, created: bool) -> None:
    """Remove --out again when this command created it and nothing was saved in it."""
    from .store.atomic import remove_if_empty
    if created:
        remove_if_empty(out)


class _ctrl_c_cancels:
    """First Ctrl-C: finish the current step, stop and save the run as 'cancelled'. Second: abort."""

    def __init__(self, cancel: threading.Event):
        self.cancel, self.old = cancel, None

    def _handler(self, signum, frame):
        if self.cancel.is_set():
            raise KeyboardInterrupt
        self.cancel.set()
        print("\nstopping after this step and saving (Ctrl-C again to abort without saving)", file=sys.stderr)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False


def cmd_evaluate(args) -> int:
    from .analysis.baselines import summary_lines
    from .analysis.studies import rotation_label, rotation_study
    from .analysis.unroll import measure_test
    from .store.atomic import jsonable
    from .store.checkpoint import load_checkpoint
    from .tasks import get_task
    from .train import pick_device

    ck = load_checkpoint(args.run, device=pick_device(args.device))
    task = get_task(ck.task)
    data = task.load_data(args.data_dir)
    res = measure_test(ck.model, TrainConfig.from_dict(ck.card["train"]), data, args.limit, args.mode, args.seed)
    images = task.rotation_inputs(data, args.limit)
    rows = rotation_study(ck.model, *images, args.rotations, args.uniform, args.mode, args.seed) if images else []
    res["rotations"] = [r for r in rows if r["kind"] == "fixed"]
    res["uniform_rotations"] = [r for r in rows if r["kind"] == "uniform"]
    res["per_step_accuracy_by_group"].update({f"rotation {rotation_label(r)}": r["per_step_accuracy"] for r in rows})
    res["run"] = str(ck.path)
    if args.json:                           # strict JSON: NaN / inf are written as null
        print(json.dumps(jsonable(res), allow_nan=False))
        return 0
    print(f"{ck.name} ({ck.task}, N={ck.model.max_steps}, lambda_p={ck.model.lambda_p}), mode {args.mode}, n={res['n']}")
    if args.mode == "expected":             # every sample runs all N steps; E[n] is what varies
        print(f"accuracy {res['accuracy']:.4f}   steps run: {ck.model.max_steps} (all)   expected steps E[n] "
              f"mean {res['mean_steps']:.2f} median {res['median_steps']:.2f} std {res['std_steps']:.2f}")
    else:
        print(f"accuracy {res['accuracy']:.4f}   halting step mean {res['mean_steps']:.2f} "
              f"median {res['median_steps']:.0f} std {res['std_steps']:.2f}")
    en, bc = res["expected_steps"], res["by_correctness"]
    print(f"expected steps E[n] per input: mean {en['mean']:.2f} std {en['std']:.2f} (min {en['min']:.2f}, "
          f"max {en['max']:.2f}); right {bc['correct']['count']} at E[n] {two_decimals(bc['correct']['expected_steps'])}, "
          f"wrong {bc['wrong']['count']} at E[n] {two_decimals(bc['wrong']['expected_steps'])}")
    what = "E[n]" if args.mode == "expected" else "steps"
    print("step  p_n(learned)  p_G(prior)  acc-if-stopped")
    for n, (p, q, a) in enumerate(zip(res["halting_distribution"], res["prior"], res["per_step_accuracy"]), 1):
        if p > 1e-4 or q > 1e-3:
            print(f"{n:4d}  {p:12.4f}  {q:10.4f}  {a:14.4f}")
    for row in res["rotations"] + res["uniform_rotations"]:
        label = f"{row['angle']:g} deg" if row["kind"] == "fixed" else f"U(+-{row['angle']:g}) deg"
        print(f"rotation {label:>14}: accuracy {row['accuracy']:.4f}  {what} {row['mean_steps']:.2f} +- "
              f"{row['std_steps']:.2f}  E[n] {row['expected_steps']:.2f}")
    for text in summary_lines(res["baselines"]["at_equal_steps"]):
        print(text)
    st = res["settle"]
    print(f"settle step (answers right from then on): mean {two_decimals(st['mean_settle_step'])}, E[n] - settle "
          f"{two_decimals(st['mean_expected_minus_settle'])}, never settled {st['never_settled']}")
    if "easy" in res:
        for k in ("easy", "hard"):
            r = res[k]
            print(f"{k} (k in {r['k_range']}): accuracy {r['accuracy']:.4f}  {what} {r['mean_steps']:.2f}  "
                  f"E[n] {r['expected_steps']:.2f}")
    return 0


def cmd_sweep(args) -> int:
    import time
    from pathlib import Path

    from . import sweep as S

    if args.seed is not None:
        raise ConfigError("sweep takes its seeds from --seeds, not --seed")
    base = config_from_args(args).to_dict()
    base.pop("task")
    plan = S.Plan(task=args.task, base=base, grid=S.parse_grid(args.grid), seeds=S.parse_seeds(args.seeds))
    n = len(plan.trials())                    # every trial's config is checked before anything trains
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    shape = " x ".join([f"{len(v)} {k}" for k, v in plan.grid.items()] + [f"{len(plan.seeds)} seed(s)"])
    print(f"sweep: {n} trials ({shape}) on {args.backend}, into {out}", flush=True)
    ended = []

    def on_trial(t) -> None:
        if t.status == "running":
            return
        ended.append(t)
        m = t.metrics or {}
        acc = f", test accuracy {m['accuracy']:.4f}, mean halting step {m['mean_steps']:.2f}" if m else ""
        print(f"[{len(ended)}/{n}] {t.name}: {t.status}, {t.steps} steps in {t.seconds:.1f} s{acc}"
              + (f" ({t.reason})" if t.reason else ""), flush=True)

    cancel = threading.Event()
    t0 = time.time()
    with _ctrl_c_cancels(cancel):
        trials = S.run_sweep(plan, out, args.backend, address=args.address, cpus_per_trial=args.cpus_per_trial,
                             gpus_per_trial=args.gpus_per_trial, data_dir=args.data_dir, cancel=cancel,
                             on_trial=on_trial)
    print(S.markdown_table(plan, trials), end="")
    count = {s: sum(t.status == s for t in trials) for s in ("completed", "failed")}
    resumed = sum(t.resumed for t in trials)
    print(f"{count['completed']} completed ({resumed} in an earlier run, skipped), {count['failed']} failed, "
          f"{n - count['completed'] - count['failed']} not finished, in {time.time() - t0:.1f} s; "
          f"wrote {out / S.SWEEP} and {out / S.TABLE}")
    if cancel.is_set():
        return 130
    return 3 if count["failed"] else 0
