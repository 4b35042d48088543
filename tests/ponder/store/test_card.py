"""ponder/store/card.py: the one card reader refuses every bad card with one line naming the file (a pickle
is never unpickled), odd text fields stay loadable, updates are never lost, history garbage is skipped."""
import json
import pickle

import pytest

from helpers import ShellPayload, assert_one_line, edit_card, run_threads, save_tiny_run, tiny_model
from ponder.store import card as K
from ponder.store.card import CARD, HISTORY, CheckpointError, read_card, read_history, update_card
from ponder.store.checkpoint import load_checkpoint, save_run
from ponder.store.record import RunRecord
from ponder.config import TrainConfig


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_pickle_as_card_refused_and_never_run(tiny_run, tmp_path, protocol):
    d, _ = tiny_run
    marker = tmp_path / "PWNED"
    (d / CARD).write_bytes(pickle.dumps(ShellPayload(marker), protocol=protocol))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, d / CARD)
    assert not marker.exists()


def _format_1(card):
    """The card as format 1 wrote it: the task, N and lambda_p also at the top."""
    card.update(format_version=1, **{k: card["train"][k] for k in ("task", "max_steps", "lambda_p")})
    return card


def _edit(fn):
    def apply(card):
        fn(card)
        return json.dumps(card)
    return apply


BAD_CARDS = {
    "empty-file": lambda c: "",
    "whitespace": lambda c: "   \n",
    "null": lambda c: "null",
    "list": lambda c: "[1, 2, 3]",
    "string": lambda c: '"ponder-run"',
    "number": lambda c: "42",
    "truncated": lambda c: json.dumps(c)[:50],
    "binary": lambda c: b"\xff\xfe\x00\x01garbage",
    "utf8-bom": lambda c: "\ufeff" + json.dumps(c),
    "deep-nesting": lambda c: "[" * 100000 + "]" * 100000,
    "deep-nesting-in-field": lambda c: json.dumps(c)[:-1] + ', "x": ' + "[" * 50000 + "]" * 50000 + "}",
    "over-1MiB": lambda c: json.dumps({**c, "pad": "x" * (2 * 1024 * 1024)}),
    "format-missing": _edit(lambda c: c.pop("format")),
    "format-wrong": _edit(lambda c: c.update(format="pytorch")),
    "task-missing": _edit(lambda c: _format_1(c).pop("task")),
    "task-unknown": _edit(lambda c: c["train"].update(task="cifar")),
    "task-list": _edit(lambda c: c["train"].update(task=["parity"])),
    "task-null": _edit(lambda c: c["train"].update(task=None)),
    "model-missing": _edit(lambda c: c.pop("model")),
    "model-null": _edit(lambda c: c.update(model=None)),
    "model-list": _edit(lambda c: c.update(model=[16, 8])),
    "model-string": _edit(lambda c: c.update(model="hidden=16")),
    "model-unknown-field": _edit(lambda c: c["model"].update(layers=3)),
    "model-hidden-0": _edit(lambda c: c["model"].update(hidden=0)),
    "model-hidden-negative": _edit(lambda c: c["model"].update(hidden=-16)),
    "model-hidden-string": _edit(lambda c: c["model"].update(hidden="16")),
    "model-hidden-float": _edit(lambda c: c["model"].update(hidden=16.0)),
    "model-hidden-bool": _edit(lambda c: c["model"].update(hidden=True)),
    "model-hidden-1e9": _edit(lambda c: c["model"].update(hidden=10 ** 9)),
    "model-hidden-10**400": _edit(lambda c: c["model"].update(hidden=10 ** 400)),
    "max_steps-missing": _edit(lambda c: _format_1(c).pop("max_steps")),
    "max_steps-0": _edit(lambda c: c["train"].update(max_steps=0)),
    "max_steps-negative": _edit(lambda c: c["train"].update(max_steps=-5)),
    "max_steps-201": _edit(lambda c: c["train"].update(max_steps=201)),
    "max_steps-float": _edit(lambda c: c["train"].update(max_steps=5.5)),
    "max_steps-string": _edit(lambda c: c["train"].update(max_steps="5")),
    "max_steps-bool": _edit(lambda c: c["train"].update(max_steps=True)),
    "max_steps-huge": _edit(lambda c: c["train"].update(max_steps=10 ** 400)),
    "lambda_p-missing": _edit(lambda c: _format_1(c).pop("lambda_p")),
    "lambda_p-0": _edit(lambda c: c["train"].update(lambda_p=0)),
    "lambda_p-negative": _edit(lambda c: c["train"].update(lambda_p=-0.5)),
    "lambda_p-over-1": _edit(lambda c: c["train"].update(lambda_p=1.5)),
    "lambda_p-nan": _edit(lambda c: c["train"].update(lambda_p=float("nan"))),
    "lambda_p-inf": _edit(lambda c: c["train"].update(lambda_p=float("inf"))),
    "lambda_p-string": _edit(lambda c: c["train"].update(lambda_p="0.3")),
    "lambda_p-bool": _edit(lambda c: c["train"].update(lambda_p=True)),
    "lambda_p-list": _edit(lambda c: c["train"].update(lambda_p=[0.3])),
    "train-null": _edit(lambda c: c.update(train=None)),
    "train-list": _edit(lambda c: c.update(train=["lr", 0.1])),
    "train-string": _edit(lambda c: c.update(train="lr=0.1")),
    "train-unknown-field": _edit(lambda c: c["train"].update(momentum=0.9)),
    "train-beta-negative": _edit(lambda c: c["train"].update(beta=-1)),
    "train-lr-string": _edit(lambda c: c["train"].update(lr="0.001")),
    "train-lr-zero": _edit(lambda c: c["train"].update(lr=0)),
    "train-batch-bool": _edit(lambda c: c["train"].update(batch_size=False)),
    "train-seed-negative": _edit(lambda c: c["train"].update(seed=-1)),
    "train-seed-2**70": _edit(lambda c: c["train"].update(seed=2 ** 70)),
    "train-preset-list": _edit(lambda c: c["train"].update(parity_preset=["small"])),
    "train-preset-unknown": _edit(lambda c: c["train"].update(parity_preset="giant")),
    "train-device-dict": _edit(lambda c: c["train"].update(device={"cuda": 1})),
    "train-compile-string": _edit(lambda c: c["train"].update(compile="yes")),
    "train-rotate-181": _edit(lambda c: c["train"].update(rotate_train=181)),
    "train-epochs-nan": _edit(lambda c: c["train"].update(epochs=float("nan"))),
    "name-dict": _edit(lambda c: c.update(name={"$gt": ""})),
    "name-number": _edit(lambda c: c.update(name=42)),
    "status-list": _edit(lambda c: c.update(status=["failed"])),
    "reason-huge": _edit(lambda c: c.update(reason="x" * 20000)),
    "steps-negative": _edit(lambda c: c.update(steps=-1)),
    "steps-string": _edit(lambda c: c.update(steps="many")),
    "train_seconds-string": _edit(lambda c: c.update(train_seconds="fast")),
    "metrics-string": _edit(lambda c: c.update(metrics="good")),
    "metrics-test-list": _edit(lambda c: c.update(metrics={"test": [1, 2]})),
    "metrics-accuracy-string": _edit(lambda c: c.update(metrics={"test": {"accuracy": "99%"}})),
    # numbers that passed an int / finite check and then broke st.dataframe ("Python int too large to convert
    # to C long") on the Runs and Compare pages for every session
    "steps-10**20": _edit(lambda c: c.update(steps=10 ** 20)),
    "steps-10**4000": lambda c: json.dumps(c).replace('"steps": ', '"steps": 1' + "0" * 4000 + ', "x": ', 1),
    "train_seconds-10**20": _edit(lambda c: c.update(train_seconds=10 ** 20)),
    "metrics-n-10**30": _edit(lambda c: c.update(metrics={"test": {"n": 10 ** 30, "accuracy": 0.9}})),
    "metrics-accuracy-2": _edit(lambda c: c.update(metrics={"test": {"accuracy": 2.0}})),
    "metrics-mean_steps-over-N": _edit(lambda c: c.update(metrics={"test": {"mean_steps": 1e6}})),
    "metrics-halting-negative": _edit(lambda c: c.update(metrics={"test": {"halting_distribution": [-1.0, 2.0]}})),
    # easy / hard blocks the Parity and Compare pages read
    "easy-k_range-number": _edit(lambda c: c.update(metrics={"test": {"easy": {"expected_steps": 1, "k_range": 5}}})),
    "easy-expected-string": _edit(lambda c: c.update(
        metrics={"test": {"easy": {"k_range": [1, 4], "count": 5, "expected_steps": {"mean": "x"}}}})),
    "hard-list": _edit(lambda c: c.update(metrics={"test": {"hard": [1, 2]}})),
    "hard-no-count": _edit(lambda c: c.update(metrics={"test": {"hard": {"k_range": [5, 8]}}})),
    "hard-k_range-reversed": _edit(lambda c: c.update(metrics={"test": {"hard": {"k_range": [8, 5], "count": 1}}})),
    "by_correctness-count-string": _edit(lambda c: c.update(
        metrics={"test": {"by_correctness": {"wrong": {"count": "many"}}}})),
    "modes-accuracy-nan": _edit(lambda c: c.update(metrics={"test": {"modes": {"sample": {"accuracy": float("nan")}}}})),
    # what the pages index: a format-2 train block without its task, N or lambda_p (KeyError on every page that
    # showed it, the Runs page included)
    "train-task-missing": _edit(lambda c: c["train"].pop("task")),
    "train-lambda_p-missing": _edit(lambda c: c["train"].pop("lambda_p")),
    "train-max_steps-missing": _edit(lambda c: c["train"].pop("max_steps")),
    # parses, then the code that copies and writes a card back (import, rename) recursed too deep
    "nesting-900-in-field": lambda c: json.dumps(c)[:-1] + ', "x": ' + "[" * 900 + "]" * 900 + "}",
    "nesting-65-in-metrics": _edit(lambda c: c.update(metrics={"test": {"x": _nested(63)}})),
    # valid JSON whose text is no text (ponder.text): a lone surrogate in status or created crashed the Runs page for
    # every visitor (StreamlitDataframeConversionError), in name / reason / device the pickers' tooltips and Compare
    "status-surrogate": _edit(lambda c: c.update(status="\ud800")),
    "created-surrogate": _edit(lambda c: c.update(created="2026-11-28\udfff")),
    "name-nul": _edit(lambda c: c.update(name="a\x00b")),
    "reason-escape": _edit(lambda c: c.update(reason="\x1b[2J")),
    "device-rtl-override": _edit(lambda c: c.update(device="\u202ecpu")),
    "extra-key-surrogate": _edit(lambda c: c.update({"\udc80": 1})),
    "metrics-key-nul": _edit(lambda c: c.update(metrics={"test": {"accuracy": 0.5, "x\x00": 1}})),
}


def _nested(depth):
    v = []
    for _ in range(depth - 1):
        v = [v]
    return v


@pytest.mark.parametrize("kind", sorted(BAD_CARDS))
def test_bad_card_one_line_error_naming_file(tiny_run, kind):
    d, _ = tiny_run
    card = json.loads((d / CARD).read_text())
    text = BAD_CARDS[kind](card)
    (d / CARD).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_one_line(e, d / CARD)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, d / CARD)


def test_an_mnist_card_without_its_task_is_refused_not_taken_for_the_default_task(tmp_path):
    d, _ = save_tiny_run(tmp_path / "m", "mnist")
    edit_card(d, lambda c: c["train"].pop("task"))       # TrainConfig's default task is mnist: it fit the check
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_one_line(e, "train.task is missing")


def test_a_card_read_is_whole_a_default_for_each_field_it_leaves_out(tiny_run):
    d, _ = tiny_run
    edit_card(d, lambda c: (c["train"].pop("lr"), c["train"].pop("rotate_train"), c["model"].pop("n_elems"),
                            c.update(metrics={"test": {"easy": {"k_range": [1, 4], "count": 0, "accuracy": None},
                                                       "x": _nested(60)}})))
    card = read_card(d)
    assert card["train"] == {**TrainConfig().to_dict(), **card["train"], "lr": TrainConfig.lr, "rotate_train": 0.0}
    assert card["train"]["task"] == "parity" and card["model"]["n_elems"] == 8     # ParityConfig's default
    assert card["metrics"]["test"]["easy"]["accuracy"] is None      # an empty group: nothing measured (NaN as saved)
    assert load_checkpoint(d).model.max_steps == card["train"]["max_steps"]


@pytest.mark.parametrize("field", ["n", "accuracy", "mean_steps", "median_steps", "expected_steps",
                                   "halting_distribution"])
def test_a_null_test_number_reads_as_not_measured_and_the_pages_format_the_card(tiny_run, field):
    from explorer.tables import describe_run, parity_card_line
    d, _ = tiny_run
    test = {"n": 10, "accuracy": 0.5, "mean_steps": 2.0, "median_steps": 2, "halting_distribution": [0.5, 0.5],
            "expected_steps": {"mean": 2.0, "std": 0.1, "min": 1.5, "max": 2.5},
            "easy": {"k_range": [1, 4], "count": 5, "expected_steps": 1.5},
            "hard": {"k_range": [5, 8], "count": 5, "expected_steps": 2.5}}
    edit_card(d, lambda c: c.update(metrics={"test": {**test, field: None}}))   # what save_run writes for NaN
    card = read_card(d)
    assert field not in card["metrics"]["test"] and card["metrics"]["test"]["easy"] == test["easy"]
    record = RunRecord.from_card(card)
    describe_run(record), parity_card_line(record)    # formatted '{:.2f}' / '{:,}': None raised TypeError


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage\n", b"[" * 50000 + b"\n", b"1\n2\n\"x\"\nnull\n[]\n",
                                     b'{"step": 1}\n{not json\n{"step": 2}\n', b"\x00" * 1000],
                         ids=["binary", "deep-nesting", "not-dicts", "bad-line", "nul-bytes"])
def test_history_garbage_is_skipped(tiny_run, content):
    d, _ = tiny_run
    (d / HISTORY).write_bytes(content)
    rows = read_history(d)
    assert all(isinstance(r, dict) for r in rows)


def test_history_that_is_a_folder(tiny_run):
    d, _ = tiny_run
    (d / HISTORY).unlink()
    (d / HISTORY).mkdir()
    assert read_history(d) == []


@pytest.mark.parametrize("field", ["name", "reason", "status", "device"])
@pytest.mark.parametrize("value", ["x" * 50000, "line1\nline2\x00\u202e", 12345, None])
def test_save_run_with_odd_text_fields_stays_loadable(tmp_path, field, value):
    """What a UI may pass to save_run (a traceback as the reason, a user's name) never makes an unloadable run."""
    model = tiny_model("parity", max_steps=5)
    d = save_run(tmp_path / "r", model, TrainConfig(task="parity", max_steps=5, hidden=16), **{field: value})
    ck = load_checkpoint(d)
    assert isinstance(getattr(ck.record, field), str) and len(getattr(ck.record, field)) <= K.MAX_CARD_TEXT


@pytest.mark.parametrize("edit", [lambda c: c.update(lambda_p=2.0), lambda c: c.update(task="cifar"),
                                  lambda c: c.pop("format"), lambda c: c["train"].update(beta=-1)])
def test_bad_card(tmp_path, edit):
    d, _ = save_tiny_run(tmp_path / "run")
    edit_card(d, edit)
    with pytest.raises(CheckpointError, match=str(d / CARD)):
        load_checkpoint(d)


def test_concurrent_card_updates_are_not_lost(tmp_path):
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    run_threads(8, lambda i: update_card(d, **{f"note{i}": i}))
    card = read_card(d)
    assert all(card.get(f"note{i}") == i for i in range(8))


def test_history_values_charts_read_are_numbers(tiny_run):
    d, _ = tiny_run
    rows = [{"step": 1, "loss": "high", "accuracy": [1], "mean_steps": 2.0, "halting": ["x"]},
            {"step": "2", "loss": 0.4}, {"step": 3, "loss": 0.3, "val_accuracy": {"a": 1}, "halting": [0.5, 0.5]}]
    (d / HISTORY).write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = read_history(d)
    assert got == [{"step": 1, "mean_steps": 2.0}, {"step": 3, "loss": 0.3, "halting": [0.5, 0.5]}]


@pytest.mark.parametrize("name", [CARD, HISTORY])
def test_a_card_swapped_for_a_fifo_after_the_check_is_never_waited_on(tiny_run, monkeypatch, name):
    """Between the is_file() check and the read, run.json (or metrics.jsonl) becomes a FIFO: the read
    ends at once, refused, instead of waiting forever for a writer."""
    import os
    import threading
    from pathlib import Path
    d, _ = tiny_run
    (d / name).unlink()
    os.mkfifo(d / name)
    monkeypatch.setattr(Path, "is_file", lambda self: True)        # the check saw a regular file
    got = []

    def read():
        try:
            got.append(read_card(d) if name == CARD else read_history(d))
        except CheckpointError as e:
            got.append(e)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():
        with open(d / name, "wb"):                               # let the stuck reader go
            pass
        t.join(5)
        pytest.fail(f"reading a FIFO {name} blocked")
    if name == CARD:
        assert isinstance(got[0], CheckpointError) and "not a regular file" in str(got[0])
    else:
        assert got == [[]]


@pytest.mark.long
def test_a_long_history_is_read_evenly_thinned_with_its_first_and_last_rows(tiny_run):
    # a 600,000-row metrics.jsonl took 435 MB of server memory and sent ~41 MB of chart data
    d, _ = tiny_run
    (d / HISTORY).write_text("".join(json.dumps({"step": i, "loss": 1.0}) + "\n" for i in range(1, 100001)))
    rows = read_history(d, max_rows=5)
    assert [r["step"] for r in rows] == [1, 25001, 50001, 75000, 100000]     # round(i * 99999 / 4) + 1
    assert len(read_history(d)) == 100000 and read_history(d, max_rows=1) == [{"step": 100000, "loss": 1.0}]


def test_history_numbers_charts_cannot_take_are_dropped(tiny_run):
    # a row with step 10**30 made the Compare page fail for everyone ("Integer exceeds 64-bit range")
    d, _ = tiny_run
    rows = [{"step": 10 ** 30, "loss": 0.5}, {"step": -5, "loss": 0.5},
            {"step": 3, "loss": 10 ** 30, "total_steps": 1e300, "accuracy": 0.5, "halting": [0.01] * 100000},
            {"step": 4, "loss": 0.25, "halting": [0.5, 0.5]}]
    (d / HISTORY).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_history(d) == [{"step": 3, "accuracy": 0.5}, {"step": 4, "loss": 0.25, "halting": [0.5, 0.5]}]


def test_history_fields_that_nest_are_dropped(tiny_run):
    """A row {"step": 1, "x": [[[...deep...]]]} was kept whole, and the explorer's cache pickles and copies what it
    returns (RecursionError at about 1,000 levels, less the caller's stack): no chart reads such a field."""
    d, _ = tiny_run
    (d / HISTORY).write_text('{"step": 1, "loss": 0.5, "phase": "training", "x": ' + "[" * 500 + "]" * 500
                             + ', "y": {"a": 1}}\n')
    rows = read_history(d)
    assert rows == [{"step": 1, "loss": 0.5, "phase": "training"}] and pickle.loads(pickle.dumps(rows)) == rows


def test_history_text_that_is_no_text_is_dropped(tiny_run):
    """A lone surrogate (valid JSON) or a control character in a history row's text reached the charts as it was."""
    d, _ = tiny_run
    (d / HISTORY).write_text('{"step": 1, "loss": 0.5, "phase": "\\ud800", "note": "a\\u0000", "ok": "fine",'
                             ' "\\u001b": 2}\n')
    assert read_history(d) == [{"step": 1, "loss": 0.5, "ok": "fine"}]


def test_one_line_is_the_one_error_formatter():
    # every layer's one-line error text: whitespace runs as one space, the class name for a silent error, and a
    # limit that keeps the start and says it was cut
    assert K.one_line(ValueError("bad\n  value\tthere")) == "bad value there"
    assert K.one_line(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert K.one_line(OSError("x" * 600), 500) == "x" * 499 + "…" and len(K.one_line("y" * 400, 400)) == 400
