"""The command line's parser: the flags of train, sweep, evaluate and reproduce with their types and
ranges (each bad value refused in one line), the training config the flags give, and Ctrl-C as a cancel
(train and sweep: finish the step, save, stop)."""
from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from dataclasses import fields

from ..config import ANSWER_LOSSES, DEVICES, HALTING_LOSSES, MAX_SEED, TrainConfig
from ..halting import LAMBDA_INPUTS
from ..losses import REGULARISERS, regulariser_help
from ..methods import METHODS, method_help
from ..tasks import TASKS, get_task, train_config, validate
from ..tasks.options import default_of, option_fields, options_of
from ..halt_features import LAMBDA_HEADS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


from .argtypes import _floats, _ranges, _number, _positive_int, _unit, _budget, _eval_items, _eval_steps, _seed, MAX_EVAL_ITEMS, MAX_EVAL_STEPS  # noqa: F401  (tests and callers read them here)


def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    p = _Parser(prog="python -m ponder", description="PonderNet: train, evaluate and reproduce.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("train", help="train a PonderNet and save a run folder")
    t.add_argument("--task", default=d.task, help=f"one of {', '.join(TASKS)} (default {d.task})")
    t.add_argument("--out", required=True, help="run folder to write (model.safetensors, run.json, metrics.jsonl); "
                                                "a folder that already holds a run is refused unless --overwrite")
    t.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    t.add_argument("--resume", action="store_true", help="long runs: write the training state to --out every "
                   "--checkpoint-minutes (and at Ctrl-C); the same command again continues from it")
    t.add_argument("--checkpoint-minutes", type=float, default=3.0, help="with --resume: minutes between two "
                   "saved training states (default 3)")
    add_config_flags(t, d)
    t.add_argument("--no-eval", action="store_true", help="skip the test-set evaluation after training")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--threads", type=_positive_int, default=None,
                   help="torch CPU threads (default: $OMP_NUM_THREADS if set, else the cores the machine's "
                        "load leaves free, at least 1)")

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
    e.add_argument("--mode", default="sample", choices=["sample", "deterministic", "expected"],
                   help="sample: halt with probability lambda_n; deterministic: the Q-exit, halt at the first step "
                        "whose halting CDF sum_{j<=n} p_j reaches --q (or the q of --budget); expected: the "
                        "p-weighted answer of all N steps (default sample)")
    e.add_argument("--q", type=_unit, default=None, help="deterministic mode: the Q-exit's q in [0, 1] (default 0.5, "
                   "the median step)")
    e.add_argument("--budget", type=_budget, default=None, metavar="STEPS",
                   help="deterministic mode at a compute budget: q chosen on the validation set (never trained on) "
                        "so that its mean steps there are STEPS; the result's `budget` says the q and the steps")
    e.add_argument("--limit", type=_eval_items, default=None,
                   help=f"only the first N test items (MNIST; parity draws N problems), at most {MAX_EVAL_ITEMS:,}")
    e.add_argument("--max-steps", type=_eval_steps, default=None, metavar="CAP",
                   help=f"run up to CAP steps (at most {MAX_EVAL_STEPS}), halting where the learned lambda says: "
                        "lambda_N = 1 only at CAP, so inputs may take more steps than training ever ran "
                        "(default: the N it trained with)")
    e.add_argument("--seed", type=_seed, default=0, help="seed of the halting draws in 'sample' mode")
    e.add_argument("--against", default=None, metavar="RUN2",
                   help="a competitor of the same task on the same items (e.g. the same step function trained without "
                        "halting): RUN's learned halting against RUN2's confidence exit, patience and fixed depth at "
                        "budgets 1..N, with the verdict")
    e.add_argument("--device", default="auto", choices=DEVICES)
    e.add_argument("--json", action="store_true", help="print one JSON object")

    s = sub.add_parser("study", help="measure sweeps' trials and compare their settings over seeds (study.json/md)")
    s.add_argument("folders", nargs="+", help="sweep folders of one task (python -m ponder sweep --out); one folder "
                                              "gets its study.json and study.md, several need --to")
    s.add_argument("--data-dir", default=None, help="MNIST root holding MNIST/raw")
    s.add_argument("--device", default="cpu", choices=DEVICES)
    s.add_argument("--to", default=None, help="also write study.json here (docs/studies/NAME.json: results.md reads it)")
    s.add_argument("--ship", default=None, metavar="NAME", help="choose the setting to ship as NAME (a model with "
                   "marks: mnist-adaptive, parity-15) on the validation set: the most of its marks met by the means "
                   "over seeds there; its default seed 0 ships")

    m = sub.add_parser("data", help="where MNIST is read from and whether it is there; --download fetches it")
    m.add_argument("--download", action="store_true", help="fetch MNIST with torchvision when it is missing (internet)")
    m.add_argument("--data-dir", default=None, help="MNIST root holding MNIST/raw (default $PONDER_DATA or ./data)")

    r = sub.add_parser("reproduce", help="retrain or re-evaluate the shipped models; write results.md/json")
    r.add_argument("--quick", action="store_true", help="small settings, under 5 minutes on 2 CPU cores")
    r.add_argument("--from-assets", action="store_true", help="only re-evaluate the models in assets/")
    r.add_argument("--out", default="results", help="output folder (default results)")
    r.add_argument("--data-dir", default=None)
    r.add_argument("--device", default="auto", choices=DEVICES)
    r.add_argument("--only", default=None, help="comma-separated model names (default: all)")
    r.add_argument("--merge", default=None, metavar="FOLDER", help="measure nothing: put FOLDER/NAME.json (python -m "
                   "ponder evaluate assets/NAME --json) into OUT/results.json and write OUT/results.md again")
    r.add_argument("--render", action="store_true", help="measure nothing: write OUT/results.md again from "
                   "OUT/results.json and docs/studies/")
    return p


def add_config_flags(t: argparse.ArgumentParser, d: TrainConfig) -> None:
    """The training-config flags `train` and `sweep` share (each flag defaults to None: not given)."""
    t.add_argument("--data-dir", default=None, help="MNIST root holding MNIST/raw (default $PONDER_DATA or ./data)")
    t.add_argument("--epochs", type=float, default=None, help=f"passes over the training set, or steps-per-epoch "
                   f"batches of a task that generates its data (default: {defaults('epochs')})")
    t.add_argument("--max-seconds", type=float, default=None, help="time budget; stops cleanly when used")
    t.add_argument("--lambda-p", type=float, default=None, help=f"prior lambda_p in (0, 1] (default: {defaults('lambda_p')})")
    t.add_argument("--method", default=None, choices=METHODS,
                   help=f"the halting method, one of the table ponder.methods.METHODS: {method_help()} "
                        f"(default {d.method})")
    t.add_argument("--act-epsilon", type=float, default=None,
                   help=f"--method act: halt once the halting units sum to 1 - eps (default {d.act_epsilon:g})")
    t.add_argument("--beta", type=float, default=d.beta, help=f"regulariser weight; ACT's ponder cost tau with "
                   f"--method act (default {d.beta})")
    t.add_argument("--regulariser", default=None, choices=REGULARISERS,
                   help=f"{regulariser_help()} (default: {defaults('regulariser')})")
    t.add_argument("--answer-loss", default=None, choices=ANSWER_LOSSES,
                   help="halting: sum_n p_n L_n trains the answers and the halting (the paper's); mean: deep "
                        "supervision, every step's answer weighted 1/N, the halting loss sees them detached "
                        f"(default {d.answer_loss})")
    t.add_argument("--halting-loss", default=None, choices=HALTING_LOSSES,
                   help="ce: sum_n p_n L_n; accuracy: -sum_n p_n (1[y_n right] - c n), expected accuracy minus "
                        "compute; exit: lambda_n trained towards 'the answer is right from step n on'; the last two "
                        f"need --answer-loss mean (default {d.halting_loss})")
    t.add_argument("--step-cost", type=float, default=None,
                   help=f"c of --halting-loss accuracy: the accuracy one more step must buy (default {d.step_cost:g})")
    t.add_argument("--halting-warmup", type=float, default=None,
                   help="with --answer-loss mean: the fraction of the updates before the halting loss and the "
                        f"regulariser are on (the answers train alone first) (default {d.halting_warmup:g})")
    t.add_argument("--lambda-input", default=d.lambda_input, choices=LAMBDA_INPUTS,
                   help="what the lambda head reads: hidden (the cell's state, the paper's), confidence (also the "
                        "answer's top probability and how far it moved since the last step) or stability (also for "
                        f"how many steps the answer has held and how far the state moves) (default {d.lambda_input})")
    t.add_argument("--lambda-head", default=d.lambda_head, choices=LAMBDA_HEADS,
                   help="the head on --lambda-input's features: linear, mlp (16 tanh units: it can form "
                        "'confident and unchanged'), or mlp-only (the mlp alone, the step's own head on h unread) "
                        f"(default {d.lambda_head})")
    t.add_argument("--max-steps", type=int, default=d.max_steps, help=f"N, most pondering steps (default {d.max_steps})")
    t.add_argument("--halt-epsilon", type=float, default=None,
                   help="the paper's N: train each batch until every input halts with probability >= 1 - eps "
                        "(e.g. 0.05), --max-steps the cap (default: unroll all --max-steps)")
    t.add_argument("--hidden", type=int, default=None, help=f"GRU hidden size (default: {defaults('hidden')})")
    t.add_argument("--batch-size", type=int, default=None, help=f"(default {d.batch_size})")
    t.add_argument("--lr", type=float, default=None, help=f"Adam learning rate (default: {defaults('lr')})")
    t.add_argument("--lr-schedule", default=d.lr_schedule, help="onecycle or constant")
    t.add_argument("--grad-clip", type=float, default=None, help=f"the most global gradient norm an update takes "
                   f"(default {d.grad_clip:g})")
    t.add_argument("--seed", type=_seed, default=None, help=f"(default {d.seed})")
    t.add_argument("--device", default=d.device, help="auto, cpu, cuda or mps")
    t.add_argument("--compile", action="store_true", help="torch.compile the model (GPU)")
    add_option_flags(t)


def add_option_flags(t: argparse.ArgumentParser) -> None:
    """One flag per option of each task, made from its options dataclass (ponder.tasks.options), in a group per
    task. Each defaults to None (not given); an option two tasks share is one flag."""
    seen = set()
    for task in TASKS.values():
        group = None
        for f in option_fields(task):
            if f.name in seen:
                continue
            seen.add(f.name)
            group = group or t.add_argument_group(f"{task.label} options (--task {task.name})")
            d, m = default_of(f), f.metadata
            kind = _bool if isinstance(d, bool) else type(d)
            choices = f"; one of {', '.join(map(str, m['choices']))}" if m.get("choices") else ""
            group.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None,
                               help=f"{m['help']}{choices} (default {defaults(f.name, [task.name])})")


def defaults(name: str, tasks=None) -> str:
    """A TrainConfig field's (or a task option's) default for each task, e.g. 'kl for mnist, kl-reverse for
    parity'; for one task just the value."""
    def show(t):
        cfg = train_config(t)
        v = getattr(options_of(get_task(t), cfg) if name in get_task(t).reads else cfg, name)
        return f"{v:g}" if isinstance(v, float) else str(v)
    if tasks and len(tasks) == 1:
        return show(tasks[0])
    return ", ".join(f"{show(t)} for {t}" for t in (tasks or TASKS))


def _bool(s: str) -> bool:
    if s.lower() in ("true", "1", "yes"):
        return True
    if s.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"true or false, got {s!r}")


def config_from_args(args) -> TrainConfig:
    """Task defaults, then every flag the user gave (flags default to None = not given)."""
    names = ({f.name for f in fields(TrainConfig)} - {"task", "options"}) | \
        {f.name for task in TASKS.values() for f in option_fields(task)}
    given = {k: v for k, v in vars(args).items() if k in names and v is not None}
    return validate(train_config(args.task, **given))


class ctrl_c_cancels:
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
