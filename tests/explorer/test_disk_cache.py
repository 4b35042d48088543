"""explorer.disk_cache: a study's result kept on disk per (model, stamp, settings); a corrupt or foreign file is
ignored and recomputed; an unwritable folder only means nothing is kept. And explorer.app.loaders' rotation study
through it: a first pass on a few images until the whole study was measured once."""
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from explorer import disk_cache
from helpers import save_tiny_run


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def counting(result):
    calls = []

    def compute():
        calls.append(1)
        return result
    return compute, calls


def test_a_result_is_computed_once_then_read_from_disk(runs):
    compute, calls = counting({"rows": [1.5, 2], "nan": math.nan})
    first = disk_cache.cached("rotation", "assets/m", (1, 2, 3, 4), {"limit": 200}, compute)
    again = disk_cache.cached("rotation", "assets/m", (1, 2, 3, 4), {"limit": 200}, compute)
    assert calls == [1] and first["rows"] == again["rows"] == [1.5, 2]
    assert math.isnan(again["nan"])                                  # NaN comes back as NaN, not null
    files = list((runs / ".cache" / "studies").glob("rotation-*.json"))
    assert len(files) == 1 and not list(files[0].parent.glob("*.tmp"))


@pytest.mark.parametrize("other", [dict(stamp=(1, 2, 3, 5)), dict(settings={"limit": 2000}),
                                   dict(path="assets/other"), dict(study="parity")])
def test_another_stamp_setting_model_or_study_is_measured_again(runs, other):
    base = dict(study="rotation", path="assets/m", stamp=(1, 2, 3, 4), settings={"limit": 200})
    compute, calls = counting([1])
    disk_cache.cached(base["study"], base["path"], base["stamp"], base["settings"], compute)
    k = {**base, **other}
    disk_cache.cached(k["study"], k["path"], k["stamp"], k["settings"], compute)
    assert calls == [1, 1]


def test_a_new_field_of_the_test_measurement_measures_every_kept_result_again(runs, monkeypatch):
    # the key holds a hash of TestMetrics' fields: a field added (here to a record built from it) changes the hash,
    # and a result kept under the old one is measured again, with no version raised by hand
    from dataclasses import make_dataclass

    from ponder.analysis.metrics import TestMetrics, schema
    grown = make_dataclass("Grown", [("new_measure", float, None)], bases=(TestMetrics,))
    assert disk_cache.SCHEMA == schema() != schema(grown)
    compute, calls = counting([1])
    disk_cache.cached("worth", "assets/m", (1, 2), {}, compute)
    disk_cache.cached("worth", "assets/m", (1, 2), {}, compute)
    monkeypatch.setattr(disk_cache, "SCHEMA", schema(grown))
    disk_cache.cached("worth", "assets/m", (1, 2), {}, compute)
    assert calls == [1, 1]


@pytest.mark.parametrize("damage", [b"", b"{not json", b"[1, 2]", b'{"key": {}, "result": 7}', b"\xff\xfe"])
def test_a_corrupt_or_foreign_file_is_ignored_and_replaced(runs, damage):
    args = ("rotation", "assets/m", (1, 2), {"limit": 200})
    disk_cache.cached(*args, lambda: [1, 2])
    (f,) = (runs / ".cache" / "studies").glob("*.json")
    f.write_bytes(damage)
    assert disk_cache.read(*args) is None
    compute, calls = counting([3, 4])
    assert disk_cache.cached(*args, compute) == [3, 4] and calls == [1]
    assert disk_cache.read(*args) == [3, 4]                          # the damaged file was replaced


def test_only_the_newest_results_are_kept(runs, monkeypatch):
    import os
    for i in range(5):
        disk_cache.cached("rotation", "m", (i,), {}, lambda: [i])
        f = disk_cache.file_of(disk_cache.key_of("rotation", "m", (i,), {}))
        os.utime(f, ns=(i * 10**9, i * 10**9))                        # written in this order, a second apart
    disk_cache.prune(keep=2)
    assert [i for i in range(5) if disk_cache.read("rotation", "m", (i,), {}) is not None] == [3, 4]


def test_the_kept_results_are_bounded_in_bytes(runs):
    """Any visitor can ask for a study with new settings (a seed, an angle list): 200 results of a 10,000-image,
    24-set rotation study would fill about 1.5 GB (7.5 MB each, scaled from the ~1 MB of a 2,000-image 16-set one).
    The newest that fit in MAX_BYTES together are kept."""
    import os
    for i in range(6):
        disk_cache.write("rotation", "m", (i,), {}, "x" * 1000)
        os.utime(disk_cache.file_of(disk_cache.key_of("rotation", "m", (i,), {})), ns=(i * 10**9, i * 10**9))
    size = disk_cache.file_of(disk_cache.key_of("rotation", "m", (0,), {})).stat().st_size     # the same for each
    disk_cache.prune(max_bytes=3 * size + size // 2)
    assert [i for i in range(6) if disk_cache.read("rotation", "m", (i,), {}) is not None] == [3, 4, 5]


def test_an_unwritable_runs_folder_still_gives_the_result(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("a file where the runs folder should be")
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path / "file"))
    compute, calls = counting({"a": 1})
    assert disk_cache.cached("parity", "m", (1,), {}, compute) == {"a": 1}
    assert disk_cache.cached("parity", "m", (1,), {}, compute) == {"a": 1} and calls == [1, 1]


text = st.text(st.characters(exclude_categories=("Cs", "Cc", "Cf")))      # text that is text (ponder.text)
json_data = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
                         lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4), max_leaves=12)


@pytest.mark.long
@settings(max_examples=40, deadline=None)
@given(result=json_data)
def test_what_is_read_back_is_what_was_kept(tmp_path_factory, result):
    import os
    os.environ["PONDER_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    try:
        kept = disk_cache.cached("worth", "m", (1,), {"items": 2}, lambda: result)
        assert kept == json.loads(json.dumps(result)) == disk_cache.read("worth", "m", (1,), {"items": 2})
    finally:
        del os.environ["PONDER_RUNS"]


def test_the_rotation_study_shows_a_first_pass_until_all_images_were_measured(runs, mnist):
    from explorer.app import loaders
    run = runs / "tiny"
    save_tiny_run(run, "mnist", steps=10)
    study = (str(run), loaders.stamp(run), (0.0, 90.0), (45.0,), 400, "sample", 0)
    rows, whole = loaders.rotation_first(*study)
    assert not whole and [r["n"] for r in rows] == [loaders.FIRST_PASS] * 3
    full = loaders.rotation_results(*study)
    assert [r["n"] for r in full] == [400] * 3
    loaders.rotation_results.clear()                                  # a fresh server: only the disk remembers
    rows, whole = loaders.rotation_first(*study)
    assert whole and rows == full
    small = study[:4] + (loaders.FIRST_PASS,) + study[5:]             # no more images than a first pass
    rows, whole = loaders.rotation_first(*small)
    assert whole and [r["n"] for r in rows] == [loaders.FIRST_PASS] * 3


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "link", "too-big", "surrogate", "deep", "shape"])
def test_a_kept_file_that_is_no_regular_small_result_is_never_waited_on_and_recomputed(runs, tmp_path, kind):
    """The kept results were trusted: a FIFO hung the Parity page, a link to /dev/zero ate memory, bad JSON or
    shapes crashed it."""
    import os
    args = ("parity", "m", (1, 2), {"size": 8})
    good = {"sets": {}, "by_k": [{"k": 1, "count": 4, "accuracy": 0.5, "mean_steps": 2.0, "expected_steps": 2.5,
                                  "halting_distribution": [0.5, 0.5]}], "train_k": [1, 8]}
    disk_cache.cached(*args, lambda: good, disk_cache.PARITY)
    f = disk_cache.file_of(disk_cache.key_of(*args))
    key = json.loads(f.read_text())["key"]
    f.unlink()
    if kind == "fifo":
        os.mkfifo(f)
    elif kind in ("dev-zero", "link"):
        (tmp_path / "elsewhere.json").write_text(json.dumps({"key": key, "result": good}))
        f.symlink_to("/dev/zero" if kind == "dev-zero" else tmp_path / "elsewhere.json")
    elif kind == "too-big":
        f.write_text(json.dumps({"key": key, "result": good, "pad": "x" * disk_cache.MAX_RESULT_BYTES}))
    else:
        result = {"surrogate": {**good, "train_k": [1, 8], "sets": {"\ud800": {}}},
                  "deep": {**good, "x": json.loads("[" * 100 + "]" * 100)},
                  "shape": {**good, "by_k": [{"k": "one"}]}}[kind]
        f.write_text(json.dumps({"key": key, "result": result}))
    assert disk_cache.read(*args, disk_cache.PARITY) is None
    compute, calls = counting(good)
    assert disk_cache.cached(*args, compute, disk_cache.PARITY) == good and calls == [1]


def test_pruning_never_follows_a_link_out_of_the_runs_folder(runs, tmp_path):
    """.cache/studies linked to another folder: pruning deleted 51 of 250 files there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for i in range(5):
        (outside / f"keep-{i}.json").write_text("{}")
    (runs / ".cache").mkdir(parents=True)
    (runs / ".cache" / "studies").symlink_to(outside)
    disk_cache.cached("parity", "m", (1,), {}, lambda: [1])
    disk_cache.prune(keep=0)
    assert sorted(p.name for p in outside.iterdir()) == [f"keep-{i}.json" for i in range(5)]


@pytest.mark.parametrize("shape, good, bad", [
    (disk_cache.PARITY, {"sets": {"easy": {"k_range": [1, 4], "count": 0, "accuracy": None, "mean_steps": None,
                                           "expected_steps": None, "halting_distribution": []}},
                         "by_k": [], "train_k": [1, 8]},
     [{"sets": [], "by_k": [], "train_k": []}, {"sets": {}, "by_k": [], "train_k": ["1"]}, [1, 2], 7]),
    (disk_cache.ROTATION, [], [{}, [{"kind": "fixed"}], [1]]),
    (disk_cache.SHIFTED, [{"name": "rotation 45°", "policies": {"sampled": {"mean_steps": 3.0, "accuracy": 0.9}},
                           "ci95": {"a-b": [0.1, float("nan")]}}], [[{"name": 1}], {"name": "x"}])])
def test_shapes_by_hand(shape, good, bad):
    assert disk_cache.fits(good, shape) and not any(disk_cache.fits(b, shape) for b in bad)
    assert disk_cache.fits(True, int) is False and disk_cache.fits(True, disk_cache.NUM) is False


def test_what_the_studies_measure_fits_the_shapes_their_kept_results_are_checked_against(tmp_path):
    """A shape that a real result does not fit would make every page view measure again."""
    from helpers import tiny_config, tiny_model
    from explorer.app.worth import FIELDS
    from ponder.analysis.metrics import TestMetrics
    from ponder.analysis.studies import parity_sets, parity_study
    from ponder.analysis.unroll import measure_test
    from ponder.tasks.parity.task import fitted_preset
    model = tiny_model("parity", max_steps=5, n_elems=8)
    res = measure_test(model, tiny_config("parity"), None, 200)
    worth = TestMetrics(**{k: getattr(res, k) for k in FIELDS}).to_dict()
    preset = fitted_preset(None, 8)
    parity = {**parity_study(model, 8, parity_sets(preset), 100), "train_k": list(preset["train_k"])}
    round_trip = lambda v: json.loads(json.dumps(v, default=disk_cache._plain))       # noqa: E731
    assert disk_cache.fits(round_trip(worth), disk_cache.WORTH)
    assert disk_cache.fits(round_trip(parity), disk_cache.PARITY)


def test_a_runs_measurement_is_kept_on_disk_and_in_memory_for_more_runs_than_compare_shows(runs, monkeypatch):
    """Compare's measurement cache kept 64: with 100 unmeasured runs every view measured them all again (23 s), and
    every fresh server did."""
    from explorer.app import loaders
    run, _ = save_tiny_run(runs / "imported")
    calls = []
    real = loaders.measure
    monkeypatch.setattr(loaders, "measure", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = loaders.measured_metrics(str(run), loaders.stamp(run), 64, 5)
    loaders.measured_metrics.clear()                                      # a fresh server: only the disk remembers
    again = loaders.measured_metrics(str(run), loaders.stamp(run), 64, 5)
    assert calls == [1] and first == again and first.n == 64 and 0 <= first.accuracy <= 1
    assert loaders.MEASURED_ENTRIES >= 1000 + 100 and disk_cache.MAX_FILES >= loaders.MEASURED_ENTRIES
