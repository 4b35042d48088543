"""Command line: python -m ponder {train, evaluate, sweep, study, data, reproduce} --help. The train command lives here;
the parser is args.py, the evaluate and sweep commands evaluate.py and sweep.py."""
from __future__ import annotations

import codecs
import sys
import threading

from .args import build_parser, config_from_args, ctrl_c_cancels
from .evaluate import cmd_evaluate
from .sweep import cmd_sweep
from ..config import ConfigError
from ..tasks import get_task


ASCII = {"\u2212": "-", "\u00b1": "+/-", "\u2013": "-", "\u2014": "--", "\u2026": "...", "\u2264": "<=",
         "\u2265": ">=", "\u2192": "->", "\u00b7": "*", "\u00d7": "x", "\u03bb": "lambda", "\u03b2": "beta",
         "\u03b5": "eps", "\u03b8": "theta", "\u03a3": "sum", "\u00b0": " deg", "\u00a0": " ", "\u2248": "~"}


def _ascii_or_escape(e: UnicodeEncodeError):
    """The codec error handler 'ponder-ascii': the characters the CLI prints (ASCII) in words, others escaped."""
    text = e.object[e.start:e.end]
    return "".join(ASCII.get(c) or c.encode("ascii", "backslashreplace").decode() for c in text), e.end


codecs.register_error("ponder-ascii", _ascii_or_escape)


def any_terminal(streams=None) -> None:
    """Make stdout and stderr print anything on a terminal whose encoding cannot show every character the CLI
    prints ('−', '±', 'λ' on PYTHONIOENCODING=ascii or a latin-1 locale): those are written in words, others as
    escapes, instead of a UnicodeEncodeError after the work is done."""
    for stream in streams or (sys.stdout, sys.stderr):
        try:
            "".join(ASCII).encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            try:
                stream.reconfigure(errors="ponder-ascii")
            except (AttributeError, ValueError, OSError):     # not a text stream that can change its errors
                pass
        except (AttributeError, TypeError):
            pass


def main(argv=None) -> int:
    any_terminal()
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "evaluate":
            return cmd_evaluate(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "study":
            return cmd_study(args)
        if args.command == "data":
            from .mnist_data import cmd_data
            return cmd_data(args)
        if args.command == "reproduce":
            from .reproduce import run as reproduce
            if args.merge or args.render:
                return merge_results(args.merge, args.out)
            return reproduce(quick=args.quick, from_assets=args.from_assets, out=args.out,
                             data_dir=args.data_dir, device=args.device,
                             only=[n.strip() for n in args.only.split(",") if n.strip()] if args.only is not None else None)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # known failures get one line; see _user_error
        msg = _user_error(e)
        if msg is None:
            raise
        print(f"ponder: error: {msg}", file=sys.stderr)
        return 1
    return 0


def _user_error(e: Exception):
    """A known failure's message on one line (a config, checkpoint, data, name or save error, an OS error, no such
    device); None for anything else (a bug: its traceback is shown)."""
    from ..files import SaveError
    from ..store.card import CheckpointError
    from ..data import DataError
    from ..store.runs import RunNameError
    if isinstance(e, (ConfigError, CheckpointError, DataError, RunNameError, SaveError)):
        msg = str(e)
    elif isinstance(e, OSError):
        msg = f"{e.strerror or e} ({e.filename})" if getattr(e, "filename", None) else str(e)
    elif isinstance(e, RuntimeError) and "device" in str(e):
        msg = str(e)
    else:
        return None
    return " ".join(msg.split()) or e.__class__.__name__     # always one line


def cmd_train(args) -> int:
    from pathlib import Path

    from ..files import check_writable, folder_lock
    from ..store.card import CARD, WEIGHTS

    cfg = config_from_args(args)
    if not args.out.strip():
        raise ConfigError("--out must name a run folder, got an empty name")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    created = check_writable(out)             # fail before training, not after it
    with folder_lock(out):                    # one training per run folder, from the check to the card
        held = [f for f in (CARD, WEIGHTS) if (out / f).exists() or (out / f).is_symlink()]
        state = None
        if args.resume:
            from ..training.resume import load_state
            state = load_state(out)           # a run this command started and saved a state of
            if state is None and held:
                print(f"{out} already holds a finished run and no training state; nothing to resume")
                return 0
            if state is not None:
                print(f"resuming at update {state.step} ({state.elapsed:.0f} s trained)", file=sys.stderr)
                return _train_into(args, cfg, out, created, state)
        if held and not args.overwrite:
            _remove_if_empty(out, created)
            raise ConfigError(f"--out {out} already holds a run ({', '.join(held)}); pick another folder, or "
                              f"pass --overwrite to replace it")
        return _train_into(args, cfg, out, created)


def _train_into(args, cfg, out, created: bool, state=None) -> int:
    """cmd_train once --out is checked and locked: train (from a saved TrainState when given), save, evaluate,
    report. With --resume the training state is written to --out every --checkpoint-minutes and removed once the
    run is saved there."""
    from tqdm import tqdm

    from pathlib import Path

    from ..training import lifecycle
    from ..training.progress import intra_op_threads
    from ..files import SaveError

    threads, why = train_threads(args.threads)
    if not args.quiet:
        print(f"torch threads: {threads} ({why}; --threads N to choose)", file=sys.stderr)
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

    from ..training.memory import fit_message
    too_big = fit_message(cfg)
    if too_big:                               # a warning, not a refusal: the command line is the user's own machine
        print(f"ponder: warning: {too_big}", file=sys.stderr)
    cancel = threading.Event()
    try:
        with ctrl_c_cancels(cancel), intra_op_threads(threads):
            from ..training.resume import remove_state, save_state
            keep = (lambda st: save_state(out, st)) if args.resume else None
            done = lifecycle.run(cfg, out, load_data=lambda: get_task(cfg.task).load_data(args.data_dir),
                                 callback=on_progress, cancel=cancel, evaluate=not args.no_eval, rescue=True,
                                 resume=state, on_checkpoint=keep, checkpoint_seconds=60 * args.checkpoint_minutes)
            if args.resume and done.run_dir is not None and done.record.status != "cancelled" and \
                    Path(done.run_dir) == Path(out):
                remove_state(out)             # saved as a run: nothing left to resume
    except SaveError as e:                    # the save and the fallback save both failed
        _remove_if_empty(out, created)
        print(f"ponder: error: {_user_error(e)}", file=sys.stderr)
        return 4
    except BaseException:
        _remove_if_empty(out, created)
        raise
    finally:
        if bar is not None:
            bar.close()
    res, rec = done.result, done.result.record
    line = f"{rec.status}: {rec.steps} steps in {rec.train_seconds:.1f} s on {res.device}, {threads} thread(s)"
    if rec.reason:
        line += f" ({rec.reason})"
    print(line)
    if done.saved_elsewhere:
        print(f"ponder: error: {done.saved_elsewhere}", file=sys.stderr)
    for problem in done.problems:
        print(f"ponder: warning: {problem}", file=sys.stderr)
    if done.metrics is not None:
        t = done.metrics
        print(f"test accuracy {t.accuracy:.4f}, mean halting step {t.mean_steps:.2f} "
              f"(median {t.median_steps:.0f}, std {t.std_steps:.2f}), mode {t.mode}")
    if done.run_dir is None:
        _remove_if_empty(out, created)
        return 130
    print(f"saved {done.run_dir}")
    if done.saved_elsewhere:
        _remove_if_empty(out, created)
        return 4                    # saved, but not where asked
    return 0 if rec.status != "failed" else 3


def train_threads(given=None, environ=None) -> tuple:
    """(torch threads for `train`, why): --threads when given, else $OMP_NUM_THREADS when set (torch
    already follows it), else the cores the load average leaves free (ponder.training.progress.free_cores)."""
    import os

    from ..training.progress import PROCESS_THREADS, free_threads, machine_cores_and_load
    env = os.environ if environ is None else environ
    if given:
        return int(given), "--threads"
    if env.get("OMP_NUM_THREADS", "").strip():
        return PROCESS_THREADS, "$OMP_NUM_THREADS"
    cores, load = machine_cores_and_load()
    return free_threads(env), f"{cores} cores, load average {load:.1f}"


def _remove_if_empty(out, created: bool) -> None:
    """Remove --out again when this command created it and nothing was saved in it."""
    from ..files import remove_if_empty
    if created:
        remove_if_empty(out)


def cmd_study(args) -> int:
    from pathlib import Path

    from ..journal import atomic_write_json
    from ..sweeps.study import STUDY, study, study_markdown
    if len(args.folders) > 1 and not args.to:
        raise ConfigError("a study of several sweep folders is written where --to says (e.g. docs/studies/NAME.json)")
    s = study(args.folders, data_dir=args.data_dir, device=args.device, ship=getattr(args, "ship", None))
    print(study_markdown(s), end="")
    if args.to:
        Path(args.to).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(Path(args.to), s)
    wrote = [str(Path(args.folders[0]) / STUDY)] if len(args.folders) == 1 else []
    print(f"wrote {' and '.join(wrote + ([args.to] if args.to else []))}")
    return 0


def merge_results(folder: str | None, out: str = "docs", log=print) -> int:
    """python -m ponder reproduce --merge FOLDER --out OUT: merge_evaluations of FOLDER/NAME.json into
    OUT/results.json, then OUT/results.md written again from it and docs/studies/ (--render: no FOLDER, nothing
    merged)."""
    import json
    from pathlib import Path
    from .reproduce import STUDIES, results_markdown
    from .results_worth import merge_evaluations
    from ..sweeps.study import load_studies
    from .results_studies import load_think
    from .results_ladder import load_ladder
    path = Path(out) / "results.json"
    results = json.loads(path.read_text())
    measured = {p.stem: json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))} if folder else {}
    names = merge_evaluations(results, measured)
    results["studies"], results["think"] = load_studies(STUDIES), load_think(STUDIES)
    results["ladder"] = load_ladder(STUDIES)
    path.write_text(json.dumps(results, indent=1))
    (Path(out) / "results.md").write_text(results_markdown(results))
    log(f"merged {', '.join(names) or 'nothing'} into {path}; wrote {Path(out) / 'results.md'}")
    return 0
