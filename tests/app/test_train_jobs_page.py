"""The Train page's jobs under AppTest: train a tiny job and poll it until it finishes, cancel it, bad form values
and an unwritable runs folder are one red line, two sessions starting at once respect the machine's limit, a
diverging run shows as failed, a second session and a reload see the running job."""
import re
import shutil
import threading
from types import SimpleNamespace

import pytest
import torch

from helpers import charts, one_line_errors, open_app, poll, run_ok, save_tiny_run, shown, texts
from ponder.store.card import read_card
from ponder.store.checkpoint import load_checkpoint
from ponder.config import TrainConfig
from ponder.tasks import validate
from ponder.training.loop import trains_on
from page_helpers import DIVERGING, LONG, _progress, idle_registry

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


def test_train_page_runs_a_tiny_job_until_it_finishes(runs):
    at = open_app("pages/train.py")
    assert at.title[0].value == "Train a PonderNet" and "Start training" in texts(at)
    at.sidebar.radio(key="train_task").set_value("parity")
    run_ok(at)
    for key, value in (("epochs", 0.04), ("hidden", 16), ("batch", 32), ("n", 6), ("seconds", 60)):
        at.number_input(key=f"tf_parity_{key}").set_value(value)
    at.text_input(key="tf_parity_name").input("apptest parity")
    at.button(key="tf_start").click()
    run_ok(at)
    at.switch_page("pages/digit.py")                    # the job survives switching pages and reruns
    run_ok(at)
    at.switch_page("pages/train.py")
    # 20 parity steps learn nothing: completed, but flagged (not a green success) at chance accuracy
    poll(at, lambda a: any("learned nothing" in w.value for w in a.warning))
    assert not at.success and "Completed" in at.warning[0].value and "apptest-parity" in texts(at)
    card = read_card(runs / "apptest-parity")
    assert card["status"] == "completed" and card["steps"] == 20 and card["train"]["hidden"] == 16
    assert card["train"]["device"] == "auto" and card["device"] == trains_on("auto")     # where the form said
    # training curves, the halting distribution, and the watched input's p_n, λ_n and E[n] over training
    assert len(charts(at)) == 5
    # "Try it" opens its task's page with the new run chosen (and Compare with it)
    links = {l.proto.label: l.proto for l in at.get("page_link")}
    try_it = links["Try runs/apptest-parity on the Parity page"]
    assert try_it.page == "parity" and try_it.query_string == "model=runs%2Fapptest-parity"
    assert links["Compare it with other runs"].query_string == "models=runs%2Fapptest-parity"
    # another session renames the run: the result and the link follow the run, not its old name
    from ponder.store.manage import rename_run
    rename_run("apptest-parity", "apptest-renamed", runs)
    run_ok(at)
    assert "since renamed to runs/apptest-renamed" in at.warning[0].value.replace("\\", "")
    assert "Try runs/apptest-renamed on the Parity page" in {l.proto.label for l in at.get("page_link")}
    rename_run("apptest-renamed", "apptest-parity", runs)
    # the form keeps what this run was started with (its widgets' own state was dropped on the digit page)
    assert [at.number_input(key=f"tf_parity_{k}").value for k in ("epochs", "hidden", "batch", "n")] == [0.04, 16, 32, 6]
    assert at.text_input(key="tf_parity_name").value == "apptest parity"
    at.switch_page("pages/parity.py")
    run_ok(at)
    options = at.sidebar.selectbox(key="pick_model_parity").options
    assert options[0].startswith("runs/apptest-parity · λp 0.2")            # the new run, newest first


def test_train_form_defaults_to_the_pondering_mnist_design_and_says_which_designs_ponder(runs):
    from explorer.app.forms import READER_NOTE
    at = open_app("pages/train.py")
    assert at.sidebar.radio(key="train_task").value == "mnist"
    assert at.sidebar.selectbox(key="tf_mnist_reader").value == "rows"          # the article's cnn one choice away
    assert "cnn: whole image" in at.sidebar.selectbox(key="tf_mnist_reader").options
    assert at.sidebar.slider(key="tf_mnist_lp").value == 0.5                      # MNIST's own prior default
    assert READER_NOTE in [c.value for c in at.sidebar.caption]


def test_train_form_help_says_what_each_regulariser_is(runs):
    """Each of the Regulariser choices is named in its help by the KL it adds (the sum one included), on the
    Train form and the λp sweep's."""
    from ponder.losses import REGULARISERS
    for page, key in (("train", "tf_mnist_reg"), ("sweep", "sw_reg")):
        reg = open_app(f"pages/{page}.py").selectbox(key=key)
        assert len(reg.options) == len(REGULARISERS) == 3
        assert all(r.label in reg.help for r in REGULARISERS.values()), (page, reg.help)


def test_train_form_says_which_device_the_run_trains_on(runs, monkeypatch):
    """One line under the Device choice: the CPU here; on a machine with a GPU, auto (the default) trains on it."""
    if getattr(torch.backends, "mps", None) is not None:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    at = open_app("pages/train.py")
    assert at.sidebar.selectbox(key="tf_mnist_device").value == "auto"
    assert "Trains on: cpu" in [c.value for c in at.sidebar.caption]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    at = open_app("pages/train.py")
    device = at.sidebar.selectbox(key="tf_mnist_device")
    assert device.value == "auto" and device.options == ["auto: cuda (NVIDIA H100 80GB HBM3)", "cpu", "cuda"]
    assert "Trains on: cuda (NVIDIA H100 80GB HBM3)" in [c.value for c in at.sidebar.caption]


def _start_parity_job(at, name, epochs):
    at.sidebar.radio(key="train_task").set_value("parity")
    run_ok(at)
    for key, value in (("epochs", epochs), ("hidden", 16), ("batch", 32), ("n", 6), ("seconds", 0)):
        at.number_input(key=f"tf_parity_{key}").set_value(value)
    at.text_input(key="tf_parity_name").input(name)
    at.button(key="tf_start").click()
    return run_ok(at)


@pytest.mark.long
def test_train_page_cancel_keeps_a_partial_run_and_a_busy_machine_says_so(runs):
    at = _start_parity_job(open_app("pages/train.py"), "apptest-long", 200.0)
    # live progress bar and curves (2 charts), and the watched input's 3 once the job has looked at it
    poll(at, lambda a: bool(a.get("progress")) and len(charts(a)) in (2, 5))
    other = _train_form(open_app("pages/train.py"), epochs=0.04)
    start = other.button(key="tf_start")                             # Start is disabled and says why, once
    assert start.disabled and "machine is busy" in start.help and not other.error and not other.warning
    assert [c.value for c in other.sidebar.caption if "machine is busy" in c.value]
    at.button(key="train_cancel").click()
    run_ok(at)
    poll(at, lambda a: any("Partial run**: cancelled" in w.value for w in a.warning), timeout=60)
    card = read_card(runs / "apptest-long")
    assert card["status"] == "cancelled" and 0 < card["steps"] < 200 * 500
    assert not (runs / "other-session").exists()


BAD_NAMES = ["!!!", "", "   ", "../../etc/passwd", "/abs/path", "..", ".", "a/b\\c", "\x00nul", "ünïcødé 名前", "CON",
             "x" * 64]


def _train_form(at, task="parity", **values):
    at.sidebar.radio(key="train_task").set_value(task)
    run_ok(at)
    for key, value in values.items():
        at.number_input(key=f"tf_{task}_{key}").set_value(value)
    return at


@pytest.mark.long
def test_train_form_bad_names_and_out_of_range_values_are_one_line(runs, monkeypatch):
    idle_registry()
    at = open_app("pages/train.py")
    import explorer.app.ui as U
    submitted = []                                           # (name, config) the page would start
    monkeypatch.setattr(U.loaders.job_registry(), "submit", lambda s, specs, kind, watch=None: submitted.append(specs[0])
                        or SimpleNamespace(id="0123456789ab"))
    # names: refused with a one-line error, or made safe (nothing can point outside the runs folder)
    for name in BAD_NAMES:
        _train_form(at, epochs=0.04)
        at.text_input(key="tf_parity_name").set_value(name)
        at.button(key="tf_start").click()
        run_ok(at)
        errs = one_line_errors(at)
        ok = not at.exception and (len(errs) == 1 and "run name" in errs[0] or
                                   (submitted and "/" not in submitted[-1][0] and not submitted[-1][0].startswith(".")))
        assert ok, ("train form name", repr(name))
    # values the widgets refuse in the browser, forced in here: Streamlit falls back to the default (or the
    # form says why in one line); a bad config never reaches a job
    fields = dict(lr="lr", hidden="hidden", batch="batch_size", epochs="epochs", n="max_steps", beta="beta",
                  seed="seed", seconds="max_seconds")
    for key, value in (("lr", 5.0), ("lr", 0.0), ("lr", float("nan")), ("hidden", 0), ("batch", 0), ("epochs", 0.0),
                       ("epochs", 1e9), ("n", 500), ("beta", -1.0), ("beta", float("inf")), ("seed", -3),
                       ("seconds", -5)):
        n = len(submitted)
        at = _train_form(open_app("pages/train.py"), **{key: value})
        at.button(key="tf_start").click()
        run_ok(at)
        errs = one_line_errors(at)
        if len(submitted) > n:
            cfg = submitted[-1][1]
            got = getattr(cfg, fields[key])
            ok = validate(cfg) is cfg and got != value and not errs
        else:
            ok = len(errs) == 1
        assert ok and not at.exception, ("train form value", f"{key}={value}")


def test_the_train_and_sweep_forms_cannot_ask_for_more_memory_than_fits(runs, monkeypatch):
    """A run at hidden 1024, batch 4096, N 200 would get the server OOM-killed. The widgets stop at N 100,
    hidden 512, batch 512 (those larger values, forced in, fall back to the defaults), and
    a run that does not fit in the memory free is refused with one line naming its estimate and the limit."""
    from explorer.app import forms
    from ponder.training.memory import estimate
    idle_registry()
    at = open_app("pages/train.py")
    for task in ("mnist", "parity"):
        _train_form(at, task)
        got = {key: at.number_input(key=f"tf_{task}_{key}").max for key in ("n", "hidden", "batch")}
        assert got == dict(n=100, hidden=512, batch=512), got
    worst = estimate(TrainConfig(reader="coarse", max_steps=forms.MAX_STEPS, hidden=forms.MAX_HIDDEN,
                                 batch_size=forms.MAX_BATCH))
    assert worst.total < 2.5 * 2**30                                   # what SIZE_HELP promises
    # the old maxima forced in fall back to the defaults; the registry's own check then refuses a run bigger
    # than the memory free (here a 60 MB limit) in one line, before anything starts
    monkeypatch.setenv("PONDER_MAX_JOB_MEMORY_MB", "60")
    # by hand, parity defaults: 128 x 20 x (13 x 128 + 40) x 4 B = 17.4 MB of training step + 48 MB fixed + 1 MB
    # of weights and Adam; the form's maxima: 512 x 100 x (13 x 512 + 40) x 4 B = 1,308 MB + 48 + 15
    for values, want in ((dict(n=200, hidden=1024, batch=4096), "about 66 MB of memory at its peak (batch 128 x "
                          "N 20 steps x hidden 128)"), (dict(n=100, hidden=512, batch=512), "about 1,371 MB")):
        _train_form(at, "parity", epochs=0.04, **values)
        at.text_input(key="tf_parity_name").input("too-big")
        at.button(key="tf_start").click()
        run_ok(at)
        errs = one_line_errors(at)
        assert len(errs) == 1 and f"Not started: too-big: this run needs {want}" in errs[0], errs
        assert "more than the 60 MB available" in errs[0] and not (runs / "too-big").exists()
    at.switch_page("pages/sweep.py")
    run_ok(at)
    assert at.number_input(key="sw_n").max == 100


def test_an_unwritable_runs_folder_is_refused_before_training_with_one_line(runs, monkeypatch, tmp_path):
    reg = idle_registry()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the runs folder should be")
    monkeypatch.setenv("PONDER_RUNS", str(blocker))
    at = open_app("pages/train.py")                         # no runs can be listed: the page still works
    _train_form(at, epochs=0.04, hidden=16, batch=32, n=6, seconds=60)
    at.text_input(key="tf_parity_name").set_value("nowhere")
    at.button(key="tf_start").click()
    run_ok(at)
    errs = one_line_errors(at)
    ok = len(errs) == 1 and f"{blocker}: cannot save runs in the runs folder" in errs[0] and "nothing was started" in errs[0]
    assert ok and not at.exception and not at.success, ("save error", "runs folder is a file", errs)
    assert reg.busy_message("nobody") == ""


def _start(at, name, epochs):
    _train_form(at, epochs=epochs, hidden=16, batch=32, n=6, seconds=0)
    at.text_input(key="tf_parity_name").set_value(name)
    at.button(key="tf_start").click()
    return at


@pytest.mark.long
def test_two_sessions_start_training_at_the_same_moment(runs, monkeypatch):
    reg = idle_registry()
    # Both clicks reach the registry at the same moment: each page run waits there for the other. (Started
    # together, one page run could end before the other began on a loaded machine; AppTest's runtime is one
    # for the process, and the first run to end removed it under the other: "Runtime hasn't been created!")
    both_there, submit = threading.Barrier(2), reg.submit

    def submit_together(*args, **kw):
        try:                                   # makes the two submits meet where it can; where one page run
            both_there.wait(5)                 # holds up the other before its submit, they go one after the other
        except threading.BrokenBarrierError:   # (a CI run waited here for the whole 60 s AppTest timeout)
            pass
        return submit(*args, **kw)
    monkeypatch.setattr(reg, "submit", submit_together)
    # 1,000 tiny steps (a few seconds): the first job is still running when the other start arrives,
    # even on a loaded machine where one session's run can lag the other's by a second
    sessions = [_start(open_app("pages/train.py"), f"race-{i}", 2.0) for i in range(2)]
    barrier, errors = threading.Barrier(2), []

    def go(at):
        try:
            barrier.wait(10)
            at.run()
        except BaseException as e:                          # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go, args=(at,)) for at in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not any(at.exception for at in sessions), [e.value for at in sessions for e in at.exception]
    busy = [at for at in sessions if any("machine is busy" in e.value for e in at.error)]
    running = [at for at in sessions if at.get("progress") or any("Training job" in m.value for m in at.markdown)]
    assert len(busy) == 1 and len(running) == 2, ("concurrency", "two starts at once")   # both show the job
    assert len(one_line_errors(busy[0])) == 1 and not busy[0].warning          # one clear message, not two
    assert "started elsewhere" in texts(busy[0])                                # ... and whose job it shows
    winner = next(at for at in sessions if at is not busy[0])
    assert "started elsewhere" not in texts(winner)
    # a cancel before the first step saves nothing ("Not saved."): on a loaded machine the job had not begun
    # training when the click came; its live curves show once steps are logged
    poll(winner, lambda a: len(charts(a)) in (2, 5))           # the curves (and the watched input's 3 charts)
    winner.button(key="train_cancel").click()                   # one job trained; no need to wait for its end
    poll(winner, lambda a: any("Partial run**: cancelled" in w.value for w in a.warning), timeout=60)
    names = [p.name for p in runs.iterdir() if p.name.startswith("race-")]
    assert len(names) == 1 and read_card(runs / names[0])["status"] == "cancelled"


@pytest.mark.long
def test_sequential_runs_with_one_name_are_complete_and_distinct(runs):
    idle_registry()
    dirs = []
    for i in range(2):                                       # two sessions, one after the other
        at = _start(open_app("pages/train.py"), "same name", 0.04)
        run_ok(at)
        said = [shown(c.value) for c in at.sidebar.caption if "became" in c.value]      # told in the form
        assert len(said) == 1 and "The name same name became same-name" in said[0] and "a name keeps only letters, " \
            "digits, '.', '_' and '-', at most 64 characters" in said[0], said
        poll(at, lambda a: any("Completed" in s.value for s in [*a.success, *a.warning]))
        done = next(shown(s.value) for s in [*at.success, *at.warning] if "Completed" in s.value)
        dirs.append(re.search(r"Saved as \*\*runs/([\w.-]+?)\*\*", done).group(1))
        assert f"in the folder {(runs / dirs[-1]).resolve()}." in done, done      # the real folder, not 'runs/'
    assert dirs == ["same-name", "same-name-2"], dirs
    assert done.endswith("The name same-name became same-name-2 (same-name was taken)."), done
    cards = [read_card(runs / d) for d in dirs]
    ok = all(c["status"] == "completed" and c["steps"] == 20 for c in cards) and cards[0]["name"] != cards[1]["name"]
    assert ok, ("concurrency", "same name twice")
    for d in dirs:
        load_checkpoint(runs / d)


def test_a_diverging_run_shows_as_failed_on_the_train_page(runs):
    reg = idle_registry()
    at = open_app("pages/train.py")
    session = at.session_state["_session_id"]
    job = reg.submit(session, [("diverges", TrainConfig(**DIVERGING))], kind="train")
    assert job.join(60)
    run_ok(at)
    errs = one_line_errors(at)
    ok = len(errs) == 1 and "Failed" in errs[0] and "became inf at step 1" in errs[0]
    assert ok and not at.exception, ("divergence", "train page")
    assert read_card(runs / "diverges")["status"] == "failed"
    at.switch_page("pages/parity.py")
    run_ok(at)
    at.sidebar.selectbox(key="pick_model_parity").set_value("runs/diverges")
    run_ok(at)
    assert any("FAILED" in o for o in at.sidebar.selectbox(key="pick_model_parity").options)
    assert any("became inf" in w.value for w in at.sidebar.warning) and not at.exception


def test_a_page_says_when_the_run_it_showed_is_gone(runs):
    # a run deleted in another session: the page fell back to another model without a word
    save_tiny_run(runs / "soon-gone")
    at = open_app("pages/parity.py")
    at.sidebar.selectbox(key="pick_model_parity").set_value("runs/soon-gone")
    run_ok(at)
    shutil.rmtree(runs / "soon-gone")
    run_ok(at)                                                  # the next rerun (run_ok runs the page)
    note = [i.value.replace("\\", "") for i in at.sidebar.info if "is gone" in i.value]   # plain(): escaped
    assert len(note) == 1 and note[0].startswith("runs/soon-gone is gone (deleted or renamed meanwhile): showing ")
    assert at.sidebar.selectbox(key="pick_model_parity").value != "runs/soon-gone"


def _partial(reason):
    return lambda a: any(f"Partial run**: {reason}" in w.value for w in a.warning)


def test_a_second_session_sees_the_machines_running_job_and_can_cancel_it(runs, slow_steps):
    reg = idle_registry()
    job = reg.submit("the-first-tab", [("shared-long", TrainConfig(**LONG))], kind="train")
    _progress(job)
    b = open_app(page="train")                                          # another tab: a new session, a plain URL
    assert b.get("progress") and len(charts(b)) == 2 and b.query_params["job"] == job.id
    assert "started elsewhere" in texts(b) and not b.warning and not b.error
    b.button(key="train_cancel").click()
    run_ok(b)
    assert job.join(60)
    run_ok(b)
    assert _partial("cancelled from another session at step")(b), texts(b)
    card = read_card(runs / "shared-long")
    assert card["status"] == "cancelled" and card["reason"].startswith("cancelled from another session at step")


def test_a_reload_with_the_job_in_the_url_comes_back_to_it_running_and_finished(runs, slow_steps):
    reg = idle_registry()
    job = reg.submit("before-the-reload", [("come-back", TrainConfig(**LONG))], kind="train")
    _progress(job)
    r = open_app(page="train", job=job.id)                              # the reload: a new session, ?job=<id>
    assert r.get("progress") and "Back to job" in texts(r) and "started elsewhere" not in texts(r)
    r.button(key="train_cancel").click()                                # its owner's Cancel, after the reload
    run_ok(r)
    assert job.join(60)
    r = open_app(page="train", job=job.id)                              # a reload after it finished
    assert _partial("cancelled at step")(r) and "runs/come-back" in texts(r) and len(charts(r)) == 2
    n = open_app(page="train")                                          # a new tab: it is among the recent jobs
    assert not n.get("progress") and "come-back** · partial run · started" in texts(n)
    n.button(key=f"train_show_{job.id}").click()
    run_ok(n)
    assert _partial("cancelled at step")(n) and n.query_params["job"] == job.id
    gone = open_app(page="train", job="0123456789ab")                   # an id the server does not know
    assert "not known to this server" in texts(gone) and "job" not in gone.query_params


def test_train_form_offers_every_halting_method_and_refuses_a_mix_that_only_ponder_reads_in_one_line(runs):
    from ponder.methods import METHODS
    at = open_app("pages/train.py")
    method = at.sidebar.selectbox(key="tf_mnist_method")
    assert method.value == "ponder" and len(method.options) == len(METHODS) == 4
    assert all(m.help.split(",")[0] in method.help for m in METHODS.values())
    method.set_value("act")
    at.sidebar.selectbox(key="tf_mnist_lam_in").set_value("confidence")
    at.button(key="tf_start").click()
    run_ok(at)
    (err,) = [e.value for e in at.sidebar.error]
    assert "lambda_input must be 'hidden' with method 'act'" in err.replace("\\", "") and "\n" not in err.strip()
