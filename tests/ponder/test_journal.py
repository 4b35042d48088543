"""ponder/store/journal.py: a save of several files is finished by settle() after a crash, and a journal that is
cut short, written for a folder of another name, or names anything but a temporary file of a file in its own
folder is ignored (nothing is renamed, nothing outside the folder is touched)."""
import json
import os

import pytest

from helpers import save_tiny_run
from ponder.files import write_tmp
from ponder.store.card import CARD, WEIGHTS, read_card
from ponder.store.checkpoint import load_checkpoint
from ponder.journal import JOURNAL, settle, write_journal


def test_settle_finishes_the_renames_a_journal_lists(tmp_path):
    d, _ = save_tiny_run(tmp_path / "run", steps=1)
    card = read_card(d)
    tmp = write_tmp(d / CARD, json.dumps(dict(card, steps=7)).encode())
    write_journal(d, [(tmp, d / CARD)])                  # killed right after writing the journal
    assert read_card(d)["steps"] == 1
    assert load_checkpoint(d).record.steps == 7         # a reader finishes the save first
    assert sorted(os.listdir(d)) == ["metrics.jsonl", "model.safetensors", "run.json"]


@pytest.mark.parametrize("journal", [
    '{"renames": [[".run.json.x.tmp", "run.json"]',                             # cut short
    '{"renames": [[".run.json.x.tmp", "run.json"]], "folder": "other"}',        # a rename's, before the move
    '{"renames": [["../.run.json.x.tmp", "run.json"]], "folder": null}',        # not in its folder
    '{"renames": [[".run.json.x.tmp", "../victim"]], "folder": null}',
    '{"renames": [["model.safetensors", "run.json"]], "folder": null}',         # not a temporary file
    '{"renames": [[".run.json.x.tmp", ".hidden"]], "folder": null}',
    '{"renames": "run.json"}', '[]', '"x"', '{"renames": [[1, 2]]}', '{"renames": [null]}',
    pytest.param("[" * 60000, id="nested-60000"),
    # names the OS calls refuse with a ValueError (a NUL) or UnicodeEncodeError (a lone surrogate), not an OSError:
    # it escaped settle(), whose callers catch OSError, and crashed every import once the journal was a minute old
    '{"renames": [[".run.json.\\u0000.tmp", "run.json"]], "folder": null}',
    '{"renames": [[null, "run.json\\u0000"]], "folder": null}',
    '{"renames": [[".run.json.\\ud800.tmp", "run.json"]], "folder": null}',
    '{"renames": [[null, "x\\udc80"]], "folder": null}',
])
def test_a_journal_that_is_cut_short_or_odd_is_ignored(tmp_path, journal):
    d, _ = save_tiny_run(tmp_path / "run", steps=1)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (d / ".run.json.x.tmp").write_text("{not a card")
    (tmp_path / ".run.json.x.tmp").write_text("outside")
    before = (d / WEIGHTS).read_bytes()
    (d / JOURNAL).write_text(journal)
    settle(d, (CARD,))
    assert sorted(os.listdir(d)) == ["metrics.jsonl", "model.safetensors", "run.json"]
    assert read_card(d)["steps"] == 1 and (d / WEIGHTS).read_bytes() == before
    assert victim.read_text() == "keep" and (tmp_path / ".run.json.x.tmp").read_text() == "outside"


def test_a_journal_never_renames_a_link_or_a_folder_into_place(tmp_path):
    d, _ = save_tiny_run(tmp_path / "run", steps=1)
    (tmp_path / "outside.json").write_text("{}")
    os.symlink(tmp_path / "outside.json", d / ".run.json.x.tmp")
    (d / ".metrics.jsonl.y.tmp").mkdir()
    (d / JOURNAL).write_text('{"renames": [[".run.json.x.tmp", "run.json"], [".metrics.jsonl.y.tmp", "metrics.jsonl"]]}')
    settle(d)
    assert not os.path.islink(d / CARD) and read_card(d)["steps"] == 1 and os.path.isfile(d / "metrics.jsonl")


def test_a_save_never_removes_a_journal_it_did_not_write(tmp_path, monkeypatch):
    """A journal already there (a killed writer's, not yet settled) makes a save that cannot write its own fail
    in one line, and is left for settle() to finish."""
    from ponder.files import SaveError
    from ponder.journal import write_files
    d, _ = save_tiny_run(tmp_path / "run", steps=1)
    tmp = write_tmp(d / CARD, json.dumps(dict(read_card(d), steps=7)).encode())
    write_journal(d, [(tmp, d / CARD)])
    with pytest.raises(SaveError):
        write_files({d / "metrics.jsonl": b"", d / CARD: b"{}"})
    assert (d / JOURNAL).exists() and load_checkpoint(d).record.steps == 7
