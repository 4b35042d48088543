"""What a run card may hold: check_card refuses (ConfigError, one line naming the field)
a card whose configs, descriptive fields or test metrics (ponder.analysis.metrics) are out of the ranges the
tables and pages read.
ponder.store.card.read_card runs them on every card it reads."""
from __future__ import annotations

from ..analysis.metrics import check_number, check_test_metrics
from ..config import ConfigError, TrainConfig, short_repr
from ..tasks import model_config_from_dict, validate

REQUIRED_TRAIN = ("task", "max_steps", "lambda_p")   # what the weights mean: never filled in with a default

MAX_CARD_TEXT = 10000                 # name / status / reason / device strings in a card
CARD_STRINGS = ("name", "status", "reason", "device", "created", "ponder_version")
MAX_RUN_STEPS = 10 ** 9                # optimiser steps a card may claim (the shipped runs took <= 40,000)
MAX_RUN_SECONDS = 10 ** 8              # training seconds a card may claim (about three years)


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
