"""What a run card may hold: check_card and check_test_metrics refuse (ConfigError, one line naming the field)
a card whose configs, descriptive fields or test metrics are out of the ranges the tables and pages read.
ponder.store.card.read_card runs them on every card it reads."""
from __future__ import annotations

from ..config import ConfigError, TrainConfig, finite, is_int, short_repr
from ..tasks import model_config_from_dict, validate

REQUIRED_TRAIN = ("task", "max_steps", "lambda_p")   # what the weights mean: never filled in with a default

MAX_CARD_TEXT = 10000                 # name / status / reason / device strings in a card
CARD_STRINGS = ("name", "status", "reason", "device", "created", "ponder_version")
PAYS_RANGES = {"accuracy": (0, 1), "learned": (0, 1), "fixed_depth": (0, 1), "confidence_exit": (0, 1),
               "learned_minus_confidence": (-1, 1), "learned_minus_fixed": (-1, 1), "needed": (-1, 1),
               "learned_q": (0, 1), "learned_q_minus_confidence": (-1, 1), "learned_q_minus_fixed": (-1, 1),
               "sampled_minus_learned_q": (-1, 1),
               "en_std": (0, None), "mean_steps": (1, None)}   # None: N; any other key: [-N, N] (steps)
SPREAD_KEYS = ("mean", "std", "min", "max")   # metrics.test.expected_steps: E[n] over the test inputs
METRIC_LISTS = ("halting_distribution", "per_step_accuracy", "prior")   # one number per step, charted by pages
MAX_RUN_STEPS = 10 ** 9                # optimiser steps a card may claim (the shipped runs took <= 40,000)
MAX_RUN_SECONDS = 10 ** 8              # training seconds a card may claim (about three years)
MAX_TEST_N = 10 ** 8                   # items one evaluation may have measured (the test sets hold 10,000)
MAX_K = 10 ** 4                        # a parity range's largest k (the presets go to 96)


def check_card(card: dict) -> tuple:
    """Raise ConfigError for a card whose configs or descriptive fields are out of range. Returns its
    (TrainConfig, model config): the card's train and model blocks with every other field's default."""
    for k in ("model", "train"):
        if k not in card:
            raise ConfigError(f"{k} is missing")
    for k in ("task", "max_steps", "lambda_p"):   # stored once, under train: a second copy could disagree
        if k in card:
            raise ConfigError(f"{k} belongs under train, not at the top of a format-2 card")
    if not isinstance(card["train"], dict):
        raise ConfigError(f"train must be a mapping, got {short_repr(card['train'])}")
    for k in REQUIRED_TRAIN:
        if k not in card["train"]:
            raise ConfigError(f"train.{k} is missing (a card names its task, N and lambda_p)")
    train = validate(TrainConfig.from_dict(card["train"]))
    model = model_config_from_dict(train.task, card["model"])
    for k in CARD_STRINGS:                      # the descriptive fields that pages print
        v = card.get(k)
        if v is not None and not (isinstance(v, str) and len(v) <= MAX_CARD_TEXT):
            raise ConfigError(f"{k} must be a string, got {short_repr(v)}")
    check_number("steps", card.get("steps"), 0, MAX_RUN_STEPS, integer=True, optional=True)
    check_number("train_seconds", card.get("train_seconds"), 0, MAX_RUN_SECONDS, optional=True)
    metrics = card.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, dict):
            raise ConfigError(f"metrics must be a mapping, got {short_repr(metrics)}")
        test = metrics.get("test")
        if test is not None:
            if not isinstance(test, dict):
                raise ConfigError(f"metrics.test must be a mapping, got {short_repr(test)}")
            check_test_metrics(test, train.max_steps)
    return train, model


def check_number(where: str, v, lo, hi, integer: bool = False, optional: bool = False) -> None:
    """ConfigError unless v is a number (an integer) in [lo, hi]; None passes when optional."""
    if v is None and optional:
        return
    if not ((is_int(v) if integer else finite(v)) and lo <= v <= hi):
        raise ConfigError(f"{where} must be {'an integer' if integer else 'a number'} in [{lo:,}, {hi:,}], "
                          f"got {short_repr(v)}")


def _check_mapping(where: str, v) -> dict:
    if not isinstance(v, dict):
        raise ConfigError(f"{where} must be a mapping, got {short_repr(v)}")
    return v


def check_test_metrics(test: dict, max_steps: int, where: str = "metrics.test", spread: bool = True) -> None:
    """The numbers of a metrics.test block that tables and pages read, each in its range: counts, accuracies
    in [0, 1], halting steps in [1, N], per-step lists of 1 to N numbers in [0, 1], and the easy / hard,
    by_correctness and modes blocks with these shapes. Keys no reader uses are left as they are. spread: the
    block's expected_steps is E[n]'s spread {mean, std, min, max} (a group's or a mode's is one number)."""
    N = max_steps
    check_number(f"{where}.n", test.get("n"), 1, MAX_TEST_N, integer=True, optional=True)
    check_number(f"{where}.accuracy", test.get("accuracy"), 0, 1, optional=True)
    for k in ("mean_steps", "median_steps"):
        check_number(f"{where}.{k}", test.get(k), 1, N, optional=True)
    check_number(f"{where}.std_steps", test.get("std_steps"), 0, N, optional=True)
    for k in METRIC_LISTS:
        v = test.get(k)
        if v is not None and not (isinstance(v, list) and 1 <= len(v) <= N and all(finite(x) and 0 <= x <= 1 for x in v)):
            raise ConfigError(f"{where}.{k} must be a list of 1 to max_steps = {N} numbers in [0, 1], "
                              f"got {short_repr(v)}")
    en = test.get("expected_steps")              # E[n] over the test inputs: its spread (a group's: its mean)
    if spread and en is not None:
        if not (isinstance(en, dict) and all(finite(en.get(k)) and (0 if k == "std" else 1) <= en[k] <= N
                                              for k in SPREAD_KEYS)):
            raise ConfigError(f"{where}.expected_steps must be {{mean, std, min, max}} of E[n] over the test "
                              f"inputs (std in [0, N], the others in [1, N], N = {N}), got {short_repr(en)}")
    else:
        check_number(f"{where}.expected_steps", en, 1, N, optional=True)
    for group in ("easy", "hard"):               # parity: the preset's easy and hard ranges of k
        g = test.get(group)
        if g is None:
            continue
        _check_mapping(f"{where}.{group}", g)
        kr = g.get("k_range")
        if not (isinstance(kr, list) and len(kr) == 2 and all(is_int(k) and 0 <= k <= MAX_K for k in kr)
                and kr[0] <= kr[1]):
            raise ConfigError(f"{where}.{group}.k_range must be [lo, hi], integers 0 <= lo <= hi <= {MAX_K:,}, "
                              f"got {short_repr(kr)}")
        check_number(f"{where}.{group}.count", g.get("count"), 0, MAX_TEST_N, integer=True)
        if g["count"]:                           # an empty group has no accuracy or steps (NaN as saved)
            check_test_metrics({k: g.get(k) for k in ("accuracy", "mean_steps", "expected_steps",
                                                      "halting_distribution")}, N, f"{where}.{group}", spread=False)
    p = test.get("pays")                         # ponder.analysis.pays: accuracies, differences, steps
    if p is not None:
        for k, v in _check_mapping(f"{where}.pays", p).items():
            lo, hi = PAYS_RANGES.get(k, (-N, N))
            check_number(f"{where}.pays.{short_repr(k, 30)}", v, lo, N if hi is None else hi, optional=True)
    bc = test.get("by_correctness")
    if bc is not None:
        for name, g in _check_mapping(f"{where}.by_correctness", bc).items():
            g = _check_mapping(f"{where}.by_correctness.{short_repr(name, 20)}", g)
            check_number(f"{where}.by_correctness.{name}.count", g.get("count"), 0, MAX_TEST_N, integer=True)
            check_number(f"{where}.by_correctness.{name}.expected_steps", g.get("expected_steps"), 1, N,
                          optional=True)
    modes = test.get("modes")
    if modes is not None:
        for name, m in _check_mapping(f"{where}.modes", modes).items():
            check_test_metrics(_check_mapping(f"{where}.modes.{short_repr(name, 20)}", m), N,
                               f"{where}.modes.{name}", spread=False)
