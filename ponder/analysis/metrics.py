"""The test measurement as one typed record, TestMetrics: what ponder.analysis.unroll.measure_test returns, what a
run card holds under metrics.test (TestMetrics.to_dict) and what a card gives back (TestMetrics.from_card, which
checks every number a table or page reads against its range; ConfigError, one line naming the field).

A new measurement is one field here: the card writes it and reads it back, and schema() (a hash of the fields)
changes, so results kept on disk for the old schema are measured again.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields, replace
from typing import Optional

from ..config import ConfigError, finite, is_int, short_repr

MAX_TEST_N = 10 ** 8                   # items one evaluation may have measured (the test sets hold 10,000)
MAX_K = 10 ** 4                        # a parity range's largest k (the presets go to 96)
PAYS_RANGES = {"accuracy": (0, 1), "learned": (0, 1), "fixed_depth": (0, 1), "confidence_exit": (0, 1),
               "learned_minus_confidence": (-1, 1), "learned_minus_fixed": (-1, 1), "needed": (-1, 1),
               "learned_q": (0, 1), "learned_q_minus_confidence": (-1, 1), "learned_q_minus_fixed": (-1, 1),
               "sampled_minus_learned_q": (-1, 1),
               "en_std": (0, None), "mean_steps": (1, None)}   # None: N; any other key: [-N, N] (steps)
SPREAD_KEYS = ("mean", "std", "min", "max")   # expected_steps of a whole test set: E[n] over its inputs
METRIC_LISTS = ("halting_distribution", "per_step_accuracy", "prior")   # one number per step, charted by pages
GROUPS = ("easy", "hard")                     # parity: the preset's easy and hard ranges of k


@dataclass
class TestMetrics:
    """A test measurement: of a whole test set, or of a group of it (parity's easy / hard) or one halting mode
    (`modes`), which leave out what they do not measure. None: not measured."""
    __test__ = False                           # a record, not a pytest class

    n: Optional[int] = None                    # items measured
    count: Optional[int] = None                # a group's items
    k_range: Optional[list] = None             # a parity group's [lo, hi] of k
    accuracy: Optional[float] = None           # of the mode's own halting
    mean_steps: Optional[float] = None         # the mode's halting steps: mean, median, std
    median_steps: Optional[float] = None
    std_steps: Optional[float] = None
    expected_steps: object = None              # E[n] = sum_n n p_n: {mean, std, min, max} over a whole set's inputs,
                                               # a group's or a mode's mean (a number)
    per_step_accuracy: Optional[list] = None   # [N] accuracy of step n's answer, as if every input halted there
    by_correctness: Optional[dict] = None      # {correct, wrong: {count, expected_steps}}
    halting_distribution: Optional[list] = None   # [N] mean p_n
    prior: Optional[list] = None               # [N] the truncated geometric prior
    mode: Optional[str] = None                 # sample / deterministic / expected
    q: Optional[float] = None                  # deterministic mode: the Q-exit's q (halt once sum_{j<=n} p_j >= q)
    budget: Optional[dict] = None              # deterministic at a compute budget: {steps, q, validation_mean_steps,
                                               # tuned_on}, q chosen on the validation set
    split: Optional[str] = None                # MNIST: the split measured
    test_k: Optional[list] = None              # parity: the test set's range of k
    easy: Optional["TestMetrics"] = None       # parity's easy and hard groups
    hard: Optional["TestMetrics"] = None
    by_class: Optional[list] = None            # a row per digit class (results only, not in a card)
    by_k: Optional[list] = None                # a row per parity k (results only)
    baselines: Optional[dict] = None           # ponder.analysis.equal_steps.worth_it (results only)
    settle: Optional[dict] = None
    per_step_accuracy_by_group: Optional[dict] = None
    learned_by_group: Optional[dict] = None
    pays: Optional[dict] = None                # ponder.analysis.pays: the baselines' few numbers (in a card)
    modes: Optional[dict] = None               # {mode: TestMetrics} (reproduce)
    validation: Optional["TestMetrics"] = None # the same numbers on the validation set (what a shipped setting is
                                               # chosen by; ponder.analysis.unroll.VALIDATION_KEYS)
    rotations: Optional[list] = None           # the rotation study's rows (reproduce, image tasks)
    uniform_rotations: Optional[list] = None
    against: Optional[dict] = None             # a competitor on the same items (ponder.analysis.against; results only)
    extra: dict = field(default_factory=dict)  # keys this schema does not name (a task's own), kept as they are

    @property
    def mean_expected_steps(self) -> Optional[float]:
        """Mean E[n]: the spread's mean of a whole set, a group's number. None if not measured."""
        en = self.expected_steps
        return en.get("mean") if isinstance(en, dict) else en

    @property
    def charted(self) -> bool:
        """It holds the halting distribution the pages chart (a quick or partial record may not)."""
        return bool(self.halting_distribution)

    def __bool__(self) -> bool:
        """False when nothing was measured (a card without metrics.test gives an empty record)."""
        return any(getattr(self, f.name) for f in fields(self))

    def to_dict(self) -> dict:
        """The JSON mapping (a card's metrics.test): the fields measured (None left out), then extra."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "extra" or v is None:
                continue
            if isinstance(v, TestMetrics):
                v = v.to_dict()
            elif f.name == "modes":
                v = {k: m.to_dict() if isinstance(m, TestMetrics) else m for k, m in v.items()}
            out[f.name] = v
        return {**out, **self.extra}

    def without(self, *names) -> "TestMetrics":
        """A copy with the fields `names` not measured."""
        return replace(self, **{k: None for k in names})

    @classmethod
    def from_dict(cls, d: dict) -> "TestMetrics":
        """The record of a mapping (a measurement, a JSON file); keys it does not name go to extra. No checks."""
        named = {f.name for f in fields(cls)} - {"extra"}
        kw = {k: v for k, v in d.items() if k in named}
        for g in GROUPS + ("validation",):
            if isinstance(kw.get(g), dict):
                kw[g] = cls.from_dict(kw[g])
        if isinstance(kw.get("modes"), dict):
            kw["modes"] = {k: cls.from_dict(m) if isinstance(m, dict) else m for k, m in kw["modes"].items()}
        return cls(**kw, extra={k: v for k, v in d.items() if k not in named})

    @classmethod
    def from_card(cls, test: dict, max_steps: int, where: str = "metrics.test") -> "TestMetrics":
        """The record of a card's metrics.test, once check_test_metrics passes it."""
        check_test_metrics(test, max_steps, where)
        return cls.from_dict(test)


def schema(cls: type = TestMetrics) -> str:
    """A hash of the record's fields and their types: it changes with the schema."""
    text = ";".join(f"{f.name}:{f.type}" for f in fields(cls))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


FLOAT_SLACK = 1e-9          # a computed number's rounding past its range, relative: still in range


def check_number(where: str, v, lo, hi, integer: bool = False, optional: bool = False) -> None:
    """ConfigError unless v is a number (an integer) in [lo, hi]; None passes when optional."""
    if v is None and optional:
        return
    slack = 0 if integer else FLOAT_SLACK * max(1.0, abs(lo), abs(hi))      # a mean of N's rounded past N
    if not ((is_int(v) if integer else finite(v)) and lo - slack <= v <= hi + slack):
        raise ConfigError(f"{where} must be {'an integer' if integer else 'a number'} in [{lo:,}, {hi:,}], "
                          f"got {short_repr(v)}")


def check_mapping(where: str, v) -> dict:
    if not isinstance(v, dict):
        raise ConfigError(f"{where} must be a mapping, got {short_repr(v)}")
    return v


def check_test_metrics(test: dict, max_steps: int, where: str = "metrics.test", spread: bool = True) -> None:
    """The numbers of a metrics.test mapping that tables and pages read, each in its range: counts, accuracies
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
    for group in GROUPS:
        g = test.get(group)
        if g is None:
            continue
        check_mapping(f"{where}.{group}", g)
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
        for k, v in check_mapping(f"{where}.pays", p).items():
            lo, hi = PAYS_RANGES.get(k, (-N, N))
            check_number(f"{where}.pays.{short_repr(k, 30)}", v, lo, N if hi is None else hi, optional=True)
    bc = test.get("by_correctness")
    if bc is not None:
        for name, g in check_mapping(f"{where}.by_correctness", bc).items():
            g = check_mapping(f"{where}.by_correctness.{short_repr(name, 20)}", g)
            check_number(f"{where}.by_correctness.{name}.count", g.get("count"), 0, MAX_TEST_N, integer=True)
            check_number(f"{where}.by_correctness.{name}.expected_steps", g.get("expected_steps"), 1, N,
                         optional=True)
    modes = test.get("modes")
    if modes is not None:
        for name, m in check_mapping(f"{where}.modes", modes).items():
            check_test_metrics(check_mapping(f"{where}.modes.{short_repr(name, 20)}", m), N,
                               f"{where}.modes.{name}", spread=False)
