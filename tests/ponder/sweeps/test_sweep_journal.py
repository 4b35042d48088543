"""ponder/sweeps/journal.py: the sweep folder's files as a backend tells the journal each trial's start and end
(without training anything: the records are made here)."""
import json
import threading

from ponder.files import folder_lock
from ponder.store.record import new_record
from ponder.store.runs import LOG, SWEEP, TABLE
from ponder.sweeps import plan as P
from ponder.sweeps.journal import SweepJournal
from ponder.sweeps.record import read_sweep


def journal(tmp_path, grid="lambda_p=0.2,0.5,0.9", **kw):
    p = P.Plan("parity", dict(hidden=16), P.parse_grid([grid]), [0])
    (tmp_path / "sw").mkdir()
    return SweepJournal(tmp_path / "sw", p, p.trials(), "local", **kw)


def states(folder):
    return [(r.name, r.status) for r in read_sweep(folder).trials]


def test_starts_and_ends_are_appended_to_the_log_and_read_back_between_the_whole_writes(tmp_path):
    told = []
    j = journal(tmp_path, on_trial=lambda t: told.append((t.name, t.status)))
    held = folder_lock(j.folder)             # what run_sweep holds while the sweep runs
    held.__enter__()
    j.write()
    a, b, c = j.trials
    assert states(j.folder) == [(a.name, "pending"), (b.name, "pending"), (c.name, "pending")]
    j.started(a)
    j.finished(a, new_record(a.config, {}, status="completed", steps=3))
    j.started(b)
    assert [json.loads(line)["status"] for line in (j.folder / LOG).read_text().splitlines()] == \
        ["running", "completed", "running"]                      # sweep.json untouched since the start
    assert states(j.folder) == [(a.name, "completed"), (b.name, "running"), (c.name, "pending")]
    assert told == [(a.name, "running"), (a.name, "completed"), (b.name, "running")]
    j.unfinished("cancelled", "interrupted (Ctrl-C)")            # the sweep stopped under b and c
    held.__exit__(None, None, None)
    assert (j.folder / LOG).read_text() == "" and (j.folder / TABLE).is_file()
    entries = {e["name"]: e for e in json.loads((j.folder / SWEEP).read_text())["trials"]}
    assert [(entries[t.name]["status"], entries[t.name]["reason"]) for t in (a, b, c)] == \
        [("completed", ""), ("cancelled", "interrupted (Ctrl-C)"), ("cancelled", "interrupted (Ctrl-C)")]


def test_an_earlier_sweeps_other_trials_are_kept_in_sweep_json(tmp_path):
    j = journal(tmp_path, grid="lambda_p=0.2")
    other = dict(j.trials[0].entry(), name="lambda_p0.7-seed0")
    j.kept = [other]
    j.write()
    assert [e["name"] for e in json.loads((j.folder / SWEEP).read_text())["trials"]] == ["lambda_p0.2-seed0",
                                                                                          "lambda_p0.7-seed0"]


def test_ends_told_from_several_threads_leave_one_whole_line_each(tmp_path):
    grid = "lambda_p=" + ",".join(f"0.{i:02d}" for i in range(1, 41))
    j = journal(tmp_path, grid=grid)
    j.write()

    def end(t):
        j.started(t)
        j.finished(t, new_record(t.config, {}, status="completed"))
    threads = [threading.Thread(target=end, args=(t,)) for t in j.trials]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (j.folder / LOG).read_text().splitlines()
    assert len(lines) == 80 and all(json.loads(line)["name"] for line in lines)
    assert {s for _, s in states(j.folder)} == {"completed"}
