"""ponder/config.py: every config is validated with a one-line message naming the field and the allowed
range; the validator's boundaries are real (each edge value trains); garbage mappings are refused."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from ponder.config import ConfigError, TrainConfig
from ponder.tasks import model_config_from_dict, validate
from ponder.training.loop import train


NAN, INF = float("nan"), float("inf")

# Bad values per field, as hypothesis strategies: out of range, and wrong types (a bool is not a number here)
JUNK = st.one_of(st.none(), st.text(max_size=3), st.binary(max_size=2), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=1), st.tuples(st.integers()),
                 st.just(object()), st.booleans())
FLOATS = st.floats(allow_nan=True, allow_infinity=True)


def bad_float(ok):
    return st.one_of(FLOATS.filter(lambda v: not (math.isfinite(v) and ok(v))), JUNK)


def bad_int(lo, hi=None):
    return st.one_of(st.integers().filter(lambda v: not (lo <= v and (hi is None or v <= hi))),
                     st.integers(-10, 10).map(float), FLOATS, JUNK)


def bad_choice(allowed):
    return st.one_of(st.text(max_size=12).filter(lambda v: v not in allowed), JUNK.filter(lambda v: not isinstance(v, str)))


# field -> (bad values, the allowed range the message must show)
BAD = {
    "task": (bad_choice(("mnist", "parity")), "one of mnist, parity"),
    "lambda_p": (bad_float(lambda v: 0 < v <= 1), "(0, 1]"),
    "beta": (bad_float(lambda v: v >= 0), ">= 0"),
    "max_steps": (bad_int(1, 200), "an integer in [1, 200]"),
    "halt_epsilon": (bad_float(lambda v: 0 < v < 1).filter(lambda v: v is not None), "in (0, 1) (or unset)"),
    "hidden": (bad_int(1, 4096), "an integer in [1, 4096]"),
    "batch_size": (bad_int(1, 65536), "an integer in [1, 65536]"),
    "lr": (bad_float(lambda v: 0 < v <= 1), "(0, 1]"),
    "epochs": (bad_float(lambda v: v > 0), "> 0"),
    "max_seconds": (bad_float(lambda v: v > 0).filter(lambda v: v is not None), "> 0 (or unset)"),
    "rotate_train": (bad_float(lambda v: 0 <= v <= 180), "[0, 180] degrees"),
    "seed": (bad_int(0, 2 ** 63 - 1), "an integer in [0, 2**63 - 1]"),
    "device": (bad_choice(("auto", "cpu", "cuda", "mps")), "one of auto, cpu, cuda, mps"),
    "grad_clip": (bad_float(lambda v: v > 0), "> 0"),
    "weight_decay": (bad_float(lambda v: 0 <= v <= 1), "in [0, 1]"),
    "parity_preset": (bad_choice(("small", "medium", "medium-extrapolation", "large", "paper", "extrapolation")),
                      "one of small, medium"),
    "steps_per_epoch": (bad_int(1), "an integer >= 1"),
    "log_every": (bad_int(1), "an integer >= 1"),
    "compile": (st.one_of(st.integers(), st.text(max_size=5), st.none(), st.lists(st.booleans(), max_size=1)),
                "true or false"),
    "lr_schedule": (bad_choice(("onecycle", "constant")), "onecycle or constant"),
}


@pytest.mark.long
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(BAD)).flatmap(lambda f: st.tuples(st.just(f), BAD[f][0])))
def test_bad_value_names_field_and_range(case):
    field, value = case
    with pytest.raises(ConfigError) as e:
        validate(TrainConfig(**{field: value}))
    msg = str(e.value)
    assert msg.startswith(f"{field} must be "), msg
    assert BAD[field][1] in msg, msg
    assert "\n" not in msg and len(msg) < 300, msg


# the boundaries, one step outside (hand-picked: what a property test is unlikely to hit exactly)
EDGES = [("lambda_p", 0.0), ("lambda_p", 1.0000001), ("beta", -1e-9), ("max_steps", 201), ("max_steps", 5.0),
         ("hidden", 4097), ("batch_size", 65537), ("rotate_train", 180.001), ("seed", 2 ** 63), ("seed", -1),
         ("weight_decay", 1.01), ("weight_decay", 3e38), ("lambda_p", 10 ** 400), ("max_steps", True),
         ("device", "cuda:0;rm -rf /"), ("task", "MNIST"), ("compile", "false"), ("parity_preset", ("small",)),
         ("halt_epsilon", 0.0), ("halt_epsilon", 1.0), ("halt_epsilon", True), ("step_cost", -1e-9),
         ("step_cost", 1.0000001), ("answer_loss", "sum"), ("halting_loss", "kl"), ("lambda_head", "Linear"),
         ("lambda_input", "patience"), ("halting_warmup", 1.0), ("halting_warmup", -0.1)]


@pytest.mark.parametrize("field,value", EDGES, ids=[f"{f}={v!r:.20}" for f, v in EDGES])
def test_one_step_outside_each_boundary_is_refused(field, value):
    with pytest.raises(ConfigError, match=f"^{field} must be "):
        validate(TrainConfig(**{field: value}))


def test_huge_values_do_not_blow_up_the_message():
    with pytest.raises(ConfigError) as e:
        validate(TrainConfig(lr=10 ** 5000))           # over Python's 4300-digit int->str limit
    assert len(str(e.value)) < 200
    with pytest.raises(ConfigError) as e:
        validate(TrainConfig(task="x" * 100000))
    assert len(str(e.value)) < 300


GOOD = [dict(lambda_p=1.0), dict(lambda_p=1e-9), dict(lambda_p=5e-324), dict(beta=0.0), dict(beta=1e6),
        dict(max_steps=1), dict(max_steps=200, hidden=4, batch_size=4), dict(batch_size=1), dict(hidden=1),
        dict(lr=1.0), dict(rotate_train=180.0), dict(grad_clip=1e-9), dict(weight_decay=1.0),
        dict(epochs=1e-9), dict(max_seconds=1e-9), dict(seed=2 ** 63 - 1), dict(lr_schedule="constant"),
        dict(halt_epsilon=1e-9), dict(halt_epsilon=0.999999)]


@pytest.mark.long
@pytest.mark.parametrize("kw", GOOD, ids=[",".join(f"{k}={v}" for k, v in kw.items()) for kw in GOOD])
def test_edge_values_allowed_by_validation_train_cleanly(kw):
    """The validator's boundaries are real: each trains a few steps with finite weights."""
    base = dict(task="parity", epochs=1, steps_per_epoch=3, batch_size=16, hidden=8, max_steps=5, device="cpu")
    base.update(kw)
    res = train(TrainConfig(**base))
    assert res.record.status == "completed", res.record.reason
    assert all(torch.isfinite(p).all() for p in res.model.parameters())


@pytest.mark.parametrize("d", [None, [], "lr=1", 5, ["lr", 1], {"momentum": 0.9}, {"lr": 0.1, "layers": 2}])
def test_from_dict_garbage(d):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(d)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("task,d", [("mnist", None), ("mnist", []), ("parity", "hidden=3"), ("parity", {"layers": 2}),
                                    ("mnist", {"hidden": 0}), ("mnist", {"dropout": 1.0}), ("mnist", {"dropout": NAN}),
                                    ("mnist", {"embed": "128"}), ("parity", {"n_elems": True}),
                                    ("parity", {"hidden": 10 ** 400}), ("cifar", {}), (None, {}), (["mnist"], {})])
def test_model_config_garbage(task, d):
    with pytest.raises(ConfigError) as e:
        model_config_from_dict(task, d)
    assert "\n" not in str(e.value)


def test_a_training_config_without_halt_epsilon_unrolls_all_steps():
    """A card written before the field existed loads with it unset (every batch runs all max_steps)."""
    d = TrainConfig().to_dict()
    del d["halt_epsilon"]
    assert validate(TrainConfig.from_dict(d)).halt_epsilon is None


def test_the_accuracy_halting_loss_needs_deep_supervised_answers():
    # it trains no answer head: with the paper's answer loss nothing would train the answers
    with pytest.raises(ConfigError, match="^halting_loss must be 'ce' unless answer_loss is 'mean'"):
        validate(TrainConfig(halting_loss="accuracy"))
    assert validate(TrainConfig(halting_loss="accuracy", answer_loss="mean", step_cost=0.01)).step_cost == 0.01
    with pytest.raises(ConfigError, match="^halting_warmup must be 0 unless answer_loss is 'mean'"):
        validate(TrainConfig(halting_warmup=0.3))
    assert validate(TrainConfig(halting_warmup=0.3, answer_loss="mean")).halting_warmup == 0.3
