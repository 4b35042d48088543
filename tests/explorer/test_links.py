"""explorer/links.py: which parameters of a shared link a page keeps, and why the others are ignored."""
from hypothesis import given, strategies as st

from explorer import links

TASKS = {"mnist-default": "mnist", "mnist-rot22": "mnist", "parity-15": "parity"}


def test_bad_links_by_hand():
    # ?model=../../etc&lp=abc on the digit page (page=nope is reported by the caller, which knows it asked)
    keep, ignored = links.check_params({"model": ["../../etc"], "lp": ["abc"], "page": ["nope"]}, "digit", TASKS)
    assert keep == {"page": ["nope"]}
    assert ignored == [("model", "../../etc", "no MNIST model or run of that name"),
                       ("lp", "abc", "this page does not use it")]
    # ?page=parity&model=mnist-default: an MNIST model on the parity page
    keep, ignored = links.check_params({"page": ["parity"], "model": ["mnist-default"]}, "parity", TASKS)
    assert keep == {"page": ["parity"]}
    assert ignored == [("model", "mnist-default", "an MNIST model; this page shows parity models")]
    # Compare: the unknown one goes, the order of the others stays
    keep, ignored = links.check_params({"models": ["mnist-rot22", "nope", "parity-15"]}, "compare", TASKS)
    assert keep == {"models": ["mnist-rot22", "parity-15"]}
    assert ignored == [("models", "nope", "no model or run of that name")]


def test_good_values_are_kept_and_foreign_parameters_left_alone():
    params = {"lp": ["0.35"], "embed": ["true"]}
    assert links.check_params(params, "sweep", TASKS) == (params, [])
    assert links.check_params({"mode": ["deterministic"], "model": ["parity-15"]}, "parity", TASKS) == \
        ({"mode": ["deterministic"], "model": ["parity-15"]}, [])
    keep, ignored = links.check_params({"lp": ["0", "0.5"], "mode": ["fast"]}, "train", TASKS)
    # lp = 0 is out of 0.01..0.99; the second lp is ignored as a repeat; mode is not read on Train
    assert keep == {} and [why for _, _, why in ignored] == ["given twice; the first one is used",
                                                           "not a number from 0.01 to 0.99", "this page does not use it"]


def test_lambda_p_parsing():
    assert links.parse_lambda_p("0.35") == 0.35 and links.parse_lambda_p("0.99") == 0.99
    # λp = 1 halts every input at step 1 (a one-bar prior): refused like 0 and what is no number
    assert [links.parse_lambda_p(t) for t in ("abc", "nan", "inf", "0.001", "1", "2", None, "")] == [None] * 8


def test_the_sentence_is_one_line_and_cuts_long_values():
    line = links.ignored_sentence([("page", "nope", "no such page"), ("model", "x" * 100, "no such model")])
    assert line.startswith("Ignored in the link: page=nope (no such page); model=xxx") and "\n" not in line
    assert "x" * 39 + "…" in line and "x" * 40 not in line


def test_a_model_named_many_times_is_kept_once_and_the_sentence_stays_short():
    """?models=mnist-rot22 998 times drew the model 998 times on the Compare page; 998 long unknown names made an
    84 kB warning."""
    keep, ignored = links.check_params({"models": ["mnist-rot22"] * 998 + ["parity-15"]}, "compare", TASKS)
    assert keep["models"] == ["mnist-rot22", "parity-15"] and len(ignored) == 997
    line = links.ignored_sentence(ignored)
    assert line.count("given twice") == links.SHOWN and line.endswith("; and 992 more.") and len(line) < 300
    _, ignored = links.check_params({"models": ["z" * 500 + str(i) for i in range(998)]}, "compare", TASKS)
    assert len(links.ignored_sentence(ignored)) < 500


@given(st.dictionaries(st.sampled_from(links.NAMES + ("other",)), st.lists(st.text(max_size=12), max_size=3)),
       st.sampled_from(links.PAGES))
def test_every_value_is_kept_or_ignored_never_both(params, page):
    keep, ignored = links.check_params(params, page, TASKS)
    for name, values in params.items():
        kept, dropped = keep.get(name, []), [v for n, v, _ in ignored if n == name]
        assert sorted(kept + dropped) == sorted(str(v) for v in values), (name, kept, dropped)


def test_the_digit_pages_view_is_kept_and_a_bad_value_named():
    from explorer.drawing.shared import encode_digit
    import numpy as np
    seven = encode_digit(np.eye(28, dtype=np.uint8) * 255)
    good = {"digit": [seven], "angle": ["45"], "mode": ["deterministic"], "q": ["0.65"], "seed": ["3"], "test": ["12"]}
    assert links.check_params(good, "digit", TASKS) == (good, [])
    keep, ignored = links.check_params({"digit": ["A" * 1200], "angle": ["7"], "seed": ["-1"], "q": ["2"]}, "digit", TASKS)
    assert keep == {} and ignored == [("digit", "A" * 1200, "too long for a digit: 1,200 characters, at most 1,100"),
                                      ("angle", "7", "not a multiple of 5 from -180 to 180"),
                                      ("seed", "-1", "not a whole number from 0 to 1,000,000,000"),
                                      ("q", "2", "not a multiple of 0.05 from 0 to 1")]
    # other pages do not read a digit
    assert links.check_params({"digit": [seven]}, "train", TASKS)[1] == [("digit", seven, "this page does not use it")]


@given(st.sampled_from(["lp", "mode", "model", "models"]), st.text("ab.0123", max_size=6),
       st.sampled_from(["\x00", "\x1b", "\x7f", "\u202e", "\ud800", "\n"]))
def test_a_value_that_is_not_text_is_ignored_and_shown_escaped(name, text, bad):
    """A NUL, an escape sequence or a lone surrogate in a link's value reached the page's warning as it was."""
    value = text + bad
    keep, ignored = links.check_params({name: [value]}, "compare" if name == "models" else "digit", TASKS)
    assert value not in keep.get(name, []) and (name, value) == ignored[0][:2]
    assert ignored[0][2].startswith(f"not text: it holds U+{ord(bad):04X}")
    line = links.ignored_sentence(ignored)
    assert not any(c in line for c in "\x00\x1b\x7f\u202e\ud800\n") and ascii(value) in line, ascii(line)
