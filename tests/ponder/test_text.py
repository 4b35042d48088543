"""ponder/text.py: which text read from outside is refused, and what a writer stores instead."""
import json

from hypothesis import given, strategies as st

from ponder.text import clean_text, shown, text_ok, text_problem, walk_problem

REFUSED = ["\x00", "\x01", "\x1b", "\x7f", "\x85", "\x9f", "\u202a", "\u202e", "\u2066", "\u2069", "\ud800", "\udfff"]


def test_what_is_refused_by_hand():
    assert text_problem("a\x00b") == "holds U+0000 (a control character) at character 2"
    assert text_problem("\ud800") == "holds U+D800 (a lone surrogate, not text that encodes as UTF-8) at character 1"
    assert text_problem("abc\u202e") == "holds U+202E (a bidirectional override) at character 4"
    # free text may span lines and hold tabs; a name or a key may not
    assert text_problem("line 1\n\tline 2\r\n") is None and text_problem("a\tb", name=True).startswith("holds U+0009")
    # the marks that are not overrides (LRM, RLM), other scripts, emoji and the replacement character are text
    assert all(text_ok(s, name=True) for s in ("\u200e\u200f", "مرحبا", "日本語", "😀", "\ufffd", "λp ± 1 − 2"))
    assert not text_ok(3) and not text_ok(None)


@given(st.text(), st.sampled_from(REFUSED), st.text())
def test_any_text_holding_a_refused_character_is_refused_and_cleaned(before, bad, after):
    s = before + bad + after
    assert text_problem(s) is not None and text_problem(s, name=True) is not None
    cleaned = clean_text(s, name=True)
    assert text_ok(cleaned, name=True) and len(cleaned) == len(s) and cleaned.encode("utf-8").decode() == cleaned


@given(st.text())
def test_text_that_is_accepted_encodes_and_is_kept_by_clean_text(s):
    if text_ok(s):
        assert s.encode("utf-8").decode("utf-8") == s and clean_text(s) == s
    assert text_ok(clean_text(s)) and shown(s, limit=10 ** 6).isascii()


def test_walk_names_the_first_bad_string_in_a_json_value():
    # "\ud800" is valid JSON: json.loads gives a lone surrogate
    card = json.loads('{"train": {"reader": "rows"}, "status": "\\ud800", "tags": ["ok", "a\\u0000"]}')
    problem = walk_problem(card)
    assert problem is not None and problem.split(":")[0] in ("status", "tags[1]")
    assert walk_problem({"train": {"bad\x1bkey": 1}}) == "train: a key holds U+001B (a control character) at character 4"
    assert walk_problem({"a": [1, 2.5, None, True, {"b": "line\nbreak"}]}) is None
