"""ponder/env.py: numbers and folders from the environment, read one way; a bad number is one line naming it."""
from pathlib import Path

import pytest

from ponder.config import ConfigError
from ponder.env import EnvError, env_folder, env_number


@pytest.mark.parametrize("raw, want", [(None, 7.0), ("", 7.0), ("  ", 7.0), ("2.5", 2.5), ("0", 0.0), (" 1e3 ", 1000.0)])
def test_env_number_reads_a_finite_number_or_gives_the_default(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv("PONDER_X", raising=False)
    else:
        monkeypatch.setenv("PONDER_X", raw)
    assert env_number("PONDER_X", 7.0, 0, 1e6) == want


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "1e400", "many", "-1", "2e6", "x" * 10_000])
def test_env_number_refuses_what_is_not_a_finite_number_in_range_in_one_line(monkeypatch, raw):
    monkeypatch.setenv("PONDER_X", raw)
    with pytest.raises(EnvError) as e:
        env_number("PONDER_X", 7.0, 0, 1e6)
    msg = str(e.value)
    assert isinstance(e.value, ConfigError) and msg.startswith("PONDER_X=") and "\n" not in msg and len(msg) < 200


def test_env_folder_expands_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PONDER_Y", "~")
    assert env_folder("PONDER_Y", "runs") == tmp_path
    monkeypatch.setenv("PONDER_Y", "~/runs")
    assert env_folder("PONDER_Y", "runs") == tmp_path / "runs"
    monkeypatch.delenv("PONDER_Y")
    assert env_folder("PONDER_Y", "runs") == Path("runs")
