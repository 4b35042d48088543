"""Issue 6, explorer side: bad inputs never crash a page; they give a hint, a one-line error, or a result.

  images       canvas drawings and uploaded pictures of every PIL mode and odd sizes -> a hint or a prediction
  errors       CheckpointError / SaveError / RunNameError / ConfigError are shown as one line, never a traceback
  import       uploading a run on the Compare page: validated before it lands in the runs folder
  concurrency  two sessions start training at once (the limit holds), same names give distinct folders,
               cancel stops within a second and keeps a partial run, no ponder-job-* threads are left
  divergence   a run whose loss / gradient becomes non-finite shows as failed, with its reason, on the
               Train page and in the sweep results

Every bad input goes through `handled(kind, case, ok)`; test_zz_bad_input_summary checks that all were
handled and prints the counts (run with -s to see them).
"""
import io
import json
import re
import struct
import threading
import time
import zlib
from collections import Counter

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from conftest import ROOT, tiny_model
from explorer import canvas, compute
from explorer.jobs import JobLimitError, JobRegistry
from ponder.card import CARD, WEIGHTS, read_card
from ponder.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from test_app_pages import charts, open_app as open_page, poll, run_ok

TRIED, CLEAN = Counter(), Counter()


def handled(kind: str, case: str, ok: bool) -> None:
    TRIED[kind] += 1
    CLEAN[kind] += bool(ok)
    assert ok, f"{kind}: {case} was not handled cleanly"


TINY = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu",
            log_every=5)
DIVERGING = dict(TINY, beta=1e38)            # the KL weight overflows the gradient at the first step


@pytest.fixture(scope="module")
def mnist_model():
    return load_checkpoint(ROOT / "assets" / "mnist-default").model


@pytest.fixture(scope="module")
def hruns(tmp_path_factory):
    """A runs folder: a tiny MNIST and parity run, and runs whose weights are broken after listing."""
    root = tmp_path_factory.mktemp("hruns")
    mp = pytest.MonkeyPatch()
    mp.setenv("PONDER_RUNS", str(root))
    save_run(root / "tiny-mnist", tiny_model("mnist", max_steps=5), TrainConfig(task="mnist", max_steps=5, hidden=16),
             steps=10)
    save_run(root / "tiny-parity", tiny_model("parity", max_steps=5, n_elems=8),
             TrainConfig(task="parity", max_steps=5, hidden=16), steps=10)
    for name, task in (("broken-mnist", "mnist"), ("broken-parity", "parity"), ("sweep-lp0.45", "mnist")):
        kw = dict(n_elems=8) if task == "parity" else {}
        save_run(root / name, tiny_model(task, max_steps=5, **kw), TrainConfig(task=task, max_steps=5, hidden=16),
                 steps=10, metrics={} if name.startswith("sweep") else None)
        (root / name / WEIGHTS).write_bytes(b"\x00" * 64)          # the card still lists it; loading fails
    yield root
    from explorer.loaders import job_registry
    job_registry().shutdown()
    mp.undo()


def one_line_errors(at) -> list:
    errs = [e.value for e in at.error]                  # the whole page, sidebar included
    assert all("\n" not in e and "Traceback" not in e for e in errs), errs
    return errs


def idle_registry():
    from explorer.loaders import job_registry
    reg = job_registry()
    reg.shutdown(timeout=60)
    assert not reg.active_jobs()
    return reg


# ============================================================================= images: canvas arrays

def _stroke(size=(280, 280), width=18, line=((0.3, 0.2), (0.7, 0.2), (0.5, 0.85))):
    img = Image.new("L", size, 0)
    pts = [(x * size[0], y * size[1]) for x, y in line]
    ImageDraw.Draw(img).line(pts, fill=255, width=width)
    return np.asarray(img)


def _nan_with_ink():
    a = np.full((50, 50), np.nan, np.float32)
    a[10:40, 24:27] = 1.0
    return a


ARRAYS = {
    "none": lambda: None,
    "blank-rgba": lambda: np.zeros((280, 280, 4), np.uint8),
    "blank-black-opaque": lambda: np.dstack([np.zeros((280, 280, 3), np.uint8), np.full((280, 280), 255, np.uint8)]),
    "single-dot": lambda: np.pad(np.full((1, 1), 255, np.uint8), 139),
    "corner-dot": lambda: np.pad(np.full((1, 1), 255, np.uint8), ((0, 279), (0, 279))),
    "all-white": lambda: np.full((280, 280, 4), 255, np.uint8),
    "all-grey": lambda: np.full((280, 280), 128, np.uint8),
    "huge-stroke": lambda: _stroke(width=200),
    "filled-box": lambda: np.pad(np.full((260, 260), 255, np.uint8), 10),
    "faint-stroke": lambda: (_stroke() // 20).astype(np.uint8),
    "all-nan": lambda: np.full((28, 28), np.nan, np.float32),
    "nan-with-ink": _nan_with_ink,
    "inf": lambda: np.where(_stroke() > 0, np.inf, 0).astype(np.float64),
    "neg-inf": lambda: np.full((28, 28), -np.inf),
    "negative": lambda: -_stroke().astype(np.float32),
    "bool": lambda: _stroke() > 0,
    "int64-huge": lambda: _stroke().astype(np.int64) * 10**12,
    "float-0..1": lambda: _stroke().astype(np.float32) / 255,
    "1x1": lambda: np.full((1, 1), 255, np.uint8),
    "1x5000": lambda: np.full((1, 5000), 255, np.uint8),
    "5000x1-stroke": lambda: np.pad(np.full((4000, 1), 255, np.uint8), ((500, 500), (0, 0))),
    "3000x3000": lambda: _stroke(size=(3000, 3000), width=150),
    "5-channels": lambda: np.zeros((20, 20, 5), np.uint8),
    "1-d": lambda: np.zeros(784, np.uint8),
    "4-d": lambda: np.zeros((1, 28, 28, 1), np.uint8),
    "empty": lambda: np.zeros((0, 0), np.uint8),
    "object": lambda: np.array([[None, "x"]], dtype=object),
    "nested-list": lambda: _stroke(size=(40, 40), width=4).tolist(),
    "complex": lambda: _stroke(size=(40, 40), width=4).astype(np.complex64),
    "grey+alpha": lambda: np.dstack([_stroke(), _stroke()]),
}


def _valid_digit(d) -> bool:
    return isinstance(d, np.ndarray) and d.shape == (28, 28) and d.dtype == np.uint8 and d.max() > 0


def _predicts(model, digit) -> bool:
    for angle in (0, 90):
        tr = compute.trace_input(model, canvas.model_input(digit, angle), "sample", 0)
        if not (0 <= tr.pred <= 9 and np.isfinite(tr.probs).all() and 1 <= tr.halt_step <= tr.max_steps):
            return False
    return True


@pytest.mark.parametrize("case", sorted(ARRAYS))
def test_canvas_arrays_give_a_hint_or_a_prediction(case, mnist_model):
    try:
        digit = canvas.preprocess_canvas(ARRAYS[case]())
    except Exception as e:                              # noqa: BLE001 - counted as not handled
        handled("canvas array", f"{case} ({e!r})", False)
    handled("canvas array", case, digit is None or (_valid_digit(digit) and _predicts(mnist_model, digit)))


def test_expected_canvas_outcomes():
    pre = canvas.preprocess_canvas
    for case in ("none", "blank-rgba", "blank-black-opaque", "all-white", "all-grey", "all-nan", "neg-inf", "empty",
                 "5-channels", "1-d", "object", "faint-stroke", "1x1", "1x5000"):
        assert pre(ARRAYS[case]()) is None, case                 # a hint, not a digit
    for case in ("single-dot", "huge-stroke", "nan-with-ink", "bool", "float-0..1", "3000x3000", "grey+alpha"):
        assert _valid_digit(pre(ARRAYS[case]())), case            # a prediction


# ============================================================================= images: uploads

def _encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _seven(size=(120, 160), mode="L", ink=0, paper=255):
    img = Image.new("L", size, paper)
    w, h = size
    ImageDraw.Draw(img).line([(0.25 * w, 0.2 * h), (0.75 * w, 0.2 * h), (0.5 * w, 0.85 * h)], fill=ink,
                             width=max(1, w // 10))
    return img


def _mode(mode: str) -> Image.Image:
    base = _seven()
    if mode in ("I;16", "I;16B"):
        a = (np.asarray(base).astype(np.uint16) * 257)
        return Image.frombytes(mode, base.size, a.astype("<u2" if mode == "I;16" else ">u2").tobytes())
    if mode == "PA":
        return base.convert("P").convert("PA")
    if mode == "I":
        return Image.fromarray(np.asarray(base).astype(np.int32) * 1000)
    if mode == "F":
        return Image.fromarray(np.asarray(base).astype(np.float32) / 255.0)
    return base.convert(mode)


# (PIL mode, file format): every mode the issue names, and a few more
MODES = [("1", "PNG"), ("L", "PNG"), ("LA", "PNG"), ("P", "PNG"), ("P", "GIF"), ("RGB", "PNG"), ("RGB", "JPEG"),
         ("RGBA", "PNG"), ("I", "TIFF"), ("I;16", "PNG"), ("I;16", "TIFF"), ("I;16B", "TIFF"),
         ("F", "TIFF"), ("CMYK", "JPEG"), ("CMYK", "TIFF"), ("PA", "TIFF"), ("P", "BMP"), ("RGBA", "WEBP"), ("RGB", "BMP"), ("RGB", "WEBP"),
         ("YCbCr", "JPEG"), ("L", "PPM"), ("RGB", "PPM"), ("1", "BMP"), ("LA", "TIFF"), ("RGBA", "TIFF")]


@pytest.mark.parametrize("mode,fmt", MODES, ids=[f"{m}-{f}" for m, f in MODES])
def test_uploads_of_every_mode_read_as_the_same_seven(mode, fmt, mnist_model):
    img = _mode(mode)
    try:
        data = _encode(img, fmt)
    except (OSError, KeyError, ValueError) as e:
        pytest.skip(f"this Pillow cannot write {mode} as {fmt}: {e}")
    arr, why = canvas.read_upload(data)
    assert arr is not None, why
    digit, why = canvas.preprocess_upload(data)
    ok = _valid_digit(digit) and _predicts(mnist_model, digit)
    handled("upload mode", f"{mode}/{fmt}", ok)
    ref = canvas.preprocess_canvas(np.asarray(_seven()))
    assert np.abs(digit.astype(int) - ref.astype(int)).mean() < 30, "the picture was not read as the same digit"


def _png_header_only(w: int, h: int) -> bytes:
    """A PNG claiming w x h pixels with (almost) no data: a decompression bomb's header."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))


def _animated_gif() -> bytes:
    frames = [_seven().convert("P"), Image.new("P", (120, 160), 0)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


class _Upload:
    """What st.file_uploader hands over: a name, a size and getvalue()."""
    def __init__(self, name, data):
        self.name, self._data, self.size = name, data, len(data)

    def getvalue(self):
        return self._data


UPLOADS = {
    "1x1-white": (lambda: _encode(Image.new("L", (1, 1), 255), "PNG"), "hint"),
    "1x1-black": (lambda: _encode(Image.new("L", (1, 1), 0), "PNG"), "hint"),
    "1x5000": (lambda: _encode(Image.new("L", (1, 5000), 0), "PNG"), "hint"),
    "5000x1-line": (lambda: _encode(Image.fromarray(np.pad(np.full((1, 3000), 255, np.uint8), ((0, 0), (1000, 1000)))), "PNG"), "either"),
    "3000x3000-seven": (lambda: _encode(_seven((3000, 3000)), "PNG"), "digit"),
    "3000x3000-jpeg": (lambda: _encode(_seven((3000, 3000)).convert("RGB"), "JPEG", quality=70), "digit"),
    "all-white": (lambda: _encode(Image.new("RGB", (200, 200), "white"), "PNG"), "hint"),
    "all-black": (lambda: _encode(Image.new("RGB", (200, 200), "black"), "PNG"), "hint"),
    "transparent": (lambda: _encode(Image.new("RGBA", (200, 200), (0, 0, 0, 0)), "PNG"), "hint"),
    "single-dot": (lambda: _encode(Image.fromarray(np.pad(np.zeros((1, 1), np.uint8), 99, constant_values=255)), "PNG"), "digit"),
    "empty-bytes": (lambda: b"", "hint"),
    "text": (lambda: b"this is not a picture", "hint"),
    "truncated-png": (lambda: _encode(_seven(), "PNG")[:60], "hint"),
    "bomb-header": (lambda: _png_header_only(100000, 100000), "hint"),
    "zip-bytes": (lambda: b"PK\x03\x04" + b"\x00" * 200, "hint"),
    "animated-gif": (_animated_gif, "digit"),
    "uploaded-file-object": (lambda: _Upload("seven.png", _encode(_seven(), "PNG")), "digit"),
    "none": (lambda: None, "hint"),
}


@pytest.mark.parametrize("case", sorted(UPLOADS))
def test_odd_uploads_give_a_hint_or_a_prediction(case, mnist_model):
    make, want = UPLOADS[case]
    t0 = time.perf_counter()
    digit, why = canvas.preprocess_upload(make())
    took = time.perf_counter() - t0
    if digit is None:
        ok = want in ("hint", "either") and isinstance(why, str) and why and "\n" not in why
    else:
        ok = want in ("digit", "either") and _valid_digit(digit) and _predicts(mnist_model, digit) and why == ""
    handled("upload", case, ok and took < 10)


# ----------------------------------------------------------------------------- the digit page itself

def _drawing(arr_rgba: np.ndarray):
    buf = io.BytesIO()
    Image.fromarray(arr_rgba, "RGBA").save(buf, format="PNG")
    import base64
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return {"drawing": {"raw": {"objects": [{"type": "path"}], "background": "#000000"}, "data": url},
            "backgroundFit": None}


def _rgba(grey: np.ndarray) -> np.ndarray:
    return np.dstack([grey, grey, grey, np.full(grey.shape, 255, np.uint8)])


def test_digit_page_drawings_and_uploads_give_a_hint_or_a_prediction(hruns):
    at = open_page()
    drawings = {"blank": (_rgba(np.zeros((280, 280), np.uint8)), "hint"),
                "single-dot": (_rgba(np.pad(np.full((4, 4), 255, np.uint8), 138)), "prediction"),
                "all-white": (_rgba(np.full((280, 280), 255, np.uint8)), "hint"),
                "huge-stroke": (_rgba(_stroke(width=120)), "prediction"),
                "empty-state": (None, "hint")}
    for case, (arr, want) in drawings.items():
        at.session_state["canvas"] = _drawing(arr) if arr is not None else {"drawing": None, "backgroundFit": None}
        run_ok(at)
        got = "prediction" if any(m.label == "Prediction" for m in at.metric) else "hint" if at.info else "?"
        handled("digit page drawing", case, got == want and not at.exception)
    at.segmented_control(key="digit_source").set_value("Upload")
    run_ok(at)
    assert any("Upload a picture" in i.value for i in at.info)
    uploads = [("seven.png", _encode(_seven(), "PNG"), "7"), ("seven-cmyk.jpg", _encode(_mode("CMYK"), "JPEG"), "7"),
               ("seven16.png", _encode(_mode("I;16"), "PNG"), "7"), ("white.png", _encode(Image.new("L", (9, 9), 255), "PNG"), None),
               ("junk.png", b"\x89PNG not really", None), ("1x5000.png", _encode(Image.new("L", (1, 5000)), "PNG"), None)]
    for name, data, want in uploads:
        at.file_uploader(key="digit_upload").set_value((name, data, "image/png"))
        run_ok(at)
        pred = {m.label: m.value for m in at.metric}.get("Prediction")
        ok = pred == want if want else (pred is None and len(at.info) == 1 and at.info[0].value)
        handled("digit page upload", name, bool(ok) and not at.exception)
    assert len(charts(at)) == 0                                         # a hint: no empty charts drawn
    at.file_uploader(key="digit_upload").set_value(("seven.png", _encode(_seven((400, 300)), "PNG"), "image/png"))
    at.slider(key="angle").set_value(-90)
    run_ok(at)
    assert len(charts(at)) == 4 and "rotated -90°" in at.image[0].captions[0]


# ============================================================================= errors shown as one line

@pytest.mark.parametrize("key,model", [("digit", "runs/broken-mnist"), ("parity", "runs/broken-parity"),
                                       ("rotation", "runs/broken-mnist")])
def test_a_run_that_cannot_be_loaded_is_one_red_line(hruns, key, model):
    at = open_page(page=key, model=model)                   # a shared link to the broken run
    if key == "rotation":
        at.number_input(key="rot_limit").set_value(100)
        at.button(key="rot_go").click()
        run_ok(at)
    errs = one_line_errors(at)
    ok = len(errs) == 1 and WEIGHTS in errs[0] and "broken" in errs[0] and not at.exception and not charts(at)
    handled("broken run", f"{key} page", ok)


def test_compare_and_sweep_pages_with_a_broken_run(hruns):
    at = open_page("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["runs/tiny-mnist", "runs/broken-mnist"])
    run_ok(at)
    errs = one_line_errors(at)
    handled("broken run", "compare page", len(errs) == 1 and WEIGHTS in errs[0] and not at.exception)
    at.switch_page("pages/sweep.py")
    run_ok(at)
    at.radio(key="sweep_source_False").set_value("Saved sweep runs (runs/sweep-*)")
    run_ok(at)
    df = at.dataframe[0].value
    row = df[df["run"] == "runs/sweep-lp0.45"].iloc[0]
    handled("broken run", "sweep results", row["status"] == "failed" and WEIGHTS in row["reason"] and not at.exception)
    assert any("sweep-lp0.45" in e for e in one_line_errors(at))


BAD_NAMES = ["!!!", "", "   ", "../../etc/passwd", "/abs/path", "..", ".", "a/b\\c", "\x00nul", "ünïcødé 名前", "CON",
             "x" * 64]


def _train_form(at, task="parity", **values):
    at.sidebar.radio(key="train_task").set_value(task)
    run_ok(at)
    for key, value in values.items():
        at.number_input(key=f"tf_{task}_{key}").set_value(value)
    return at


def test_train_form_bad_names_and_out_of_range_values_are_one_line(hruns, monkeypatch):
    idle_registry()
    at = open_page("pages/train.py")
    import explorer.ui as U
    submitted = []                                           # (name, config) the page would start
    monkeypatch.setattr(U.loaders.job_registry(), "submit", lambda s, specs, kind: submitted.append(specs[0]))
    # names: refused with a one-line error, or made safe (nothing can point outside the runs folder)
    for name in BAD_NAMES:
        _train_form(at, epochs=0.04)
        at.text_input(key="tf_parity_name").set_value(name)
        at.button(key="tf_start").click()
        run_ok(at)
        errs = one_line_errors(at)
        ok = not at.exception and (len(errs) == 1 and "run name" in errs[0] or
                                   (submitted and "/" not in submitted[-1][0] and not submitted[-1][0].startswith(".")))
        handled("train form name", repr(name), ok)
    # values the widgets refuse in the browser, forced in here: Streamlit falls back to the default (or the
    # form says why in one line); a bad config never reaches a job
    fields = dict(lr="lr", hidden="hidden", batch="batch_size", epochs="epochs", n="max_steps", beta="beta",
                  seed="seed", seconds="max_seconds")
    for key, value in (("lr", 5.0), ("lr", 0.0), ("lr", float("nan")), ("hidden", 0), ("batch", 0), ("epochs", 0.0),
                       ("epochs", 1e9), ("n", 500), ("beta", -1.0), ("beta", float("inf")), ("seed", -3),
                       ("seconds", -5)):
        n = len(submitted)
        at = _train_form(open_page("pages/train.py"), **{key: value})
        at.button(key="tf_start").click()
        run_ok(at)
        errs = one_line_errors(at)
        if len(submitted) > n:
            cfg = submitted[-1][1]
            got = getattr(cfg, fields[key])
            ok = cfg.validate() is cfg and got != value and not errs
        else:
            ok = len(errs) == 1
        handled("train form value", f"{key}={value}", ok and not at.exception)


def test_an_unwritable_runs_folder_fails_the_run_with_one_line(hruns, monkeypatch, tmp_path):
    reg = idle_registry()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the runs folder should be")
    monkeypatch.setenv("PONDER_RUNS", str(blocker))
    at = open_page("pages/train.py")                         # no runs can be listed: the page still works
    _train_form(at, epochs=0.04, hidden=16, batch=32, n=6, seconds=60)
    at.text_input(key="tf_parity_name").set_value("nowhere")
    at.button(key="tf_start").click()
    run_ok(at)
    poll(at, lambda a: bool(a.error), timeout=120)
    errs = one_line_errors(at)
    ok = len(errs) == 1 and "Failed" in errs[0] and f"{blocker}: cannot create the runs folder" in errs[0]
    handled("save error", "runs folder is a file", ok and not at.exception)
    assert not reg.active_jobs()


# ============================================================================= importing a run (Compare page)

def _run_files(root, name="tiny-mnist"):
    return (root / name / WEIGHTS).read_bytes(), (root / name / CARD).read_bytes()


def test_import_on_the_compare_page_validates_uploads(hruns):
    weights, card = _run_files(hruns)
    pickle = io.BytesIO()
    torch.save({"w": torch.zeros(3)}, pickle)
    bad_card = json.dumps({**json.loads(card), "max_steps": 10**6}).encode()
    parity_weights, _ = _run_files(hruns, "tiny-parity")
    at = open_page("pages/compare.py")
    cases = [
        ("pickle weights", [("model.safetensors", pickle.getvalue()), ("run.json", card)], "imported", "pickle"),
        ("garbage weights", [("model.safetensors", b"\x00" * 100), ("run.json", card)], "imported", WEIGHTS),
        ("json that is not a card", [("model.safetensors", weights), ("run.json", b"[1, 2, 3]")], "imported", CARD),
        ("not json", [("model.safetensors", weights), ("run.json", b"\xff\xfe{")], "imported", CARD),
        ("out-of-range card", [("model.safetensors", weights), ("run.json", bad_card)], "imported", "max_steps"),
        ("weights of another model", [("model.safetensors", parity_weights), ("run.json", card)], "imported", "fit"),
        ("weights only", [("model.safetensors", weights)], "imported", "exactly one"),
        ("two cards", [("model.safetensors", weights), ("run.json", card), ("b.json", card)], "imported", "exactly one"),
        ("nothing", [], "imported", "exactly one"),
        ("bad name", [("model.safetensors", weights), ("run.json", card)], "!!!", "run name"),
    ]
    before = sorted(p.name for p in hruns.iterdir())
    for case, files, name, expect in cases:
        at.file_uploader(key="import_files").set_value([(f, b, "application/octet-stream") for f, b in files] or None)
        at.text_input(key="import_name").set_value(name)
        at.button(key="import_go").click()
        run_ok(at)
        errs = one_line_errors(at)
        handled("import", f"{case} -> {errs}", len(errs) == 1 and expect in errs[0] and not at.exception)
    assert sorted(p.name for p in hruns.iterdir()) == before           # nothing bad landed in the runs folder
    at.file_uploader(key="import_files").set_value([("model.safetensors", weights, "application/octet-stream"),
                                                    ("run.json", card, "application/json")])
    at.text_input(key="import_name").set_value("from upload")
    at.button(key="import_go").click()
    run_ok(at)
    assert any("runs/from-upload" in s.value for s in at.sidebar.success)
    assert "runs/from-upload" in at.multiselect(key="compare_models").value        # and it joins the comparison
    load_checkpoint(hruns / "from-upload")
    assert len(charts(at)) == 5


# ============================================================================= concurrency

def _ponder_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ponder-job-") and t.is_alive()]


def _start(at, name, epochs):
    _train_form(at, epochs=epochs, hidden=16, batch=32, n=6, seconds=0)
    at.text_input(key="tf_parity_name").set_value(name)
    at.button(key="tf_start").click()
    return at


def test_two_sessions_start_training_at_the_same_moment(hruns):
    idle_registry()
    sessions = [_start(open_page("pages/train.py"), f"race-{i}", 0.2) for i in range(2)]
    barrier, errors = threading.Barrier(2), []

    def go(at):
        try:
            barrier.wait(10)
            at.run()
        except BaseException as e:                          # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go, args=(at,)) for at in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not any(at.exception for at in sessions), [e.value for at in sessions for e in at.exception]
    busy = [at for at in sessions if any("machine is busy" in e.value for e in at.error)]
    running = [at for at in sessions if at.get("progress") or any("Training job" in m.value for m in at.markdown)]
    handled("concurrency", "two starts at once", len(busy) == 1 and len(running) == 1)
    assert len(one_line_errors(busy[0])) == 1 and not busy[0].warning          # one clear message, not two
    winner = running[0]
    poll(winner, lambda a: any("Completed" in s.value for s in a.success))
    names = [p.name for p in hruns.iterdir() if p.name.startswith("race-")]
    assert len(names) == 1 and read_card(hruns / names[0])["status"] == "completed"


def test_sequential_runs_with_one_name_are_complete_and_distinct(hruns):
    idle_registry()
    dirs = []
    for i in range(2):                                       # two sessions, one after the other
        at = _start(open_page("pages/train.py"), "same name", 0.04)
        run_ok(at)
        poll(at, lambda a: any("Completed" in s.value for s in a.success))
        dirs.append(re.search(r"runs/([\w.-]+?)\**\.?$", next(s.value for s in at.success if "Completed" in s.value)).group(1))
    assert dirs == ["same-name", "same-name-2"], dirs
    cards = [read_card(hruns / d) for d in dirs]
    ok = all(c["status"] == "completed" and c["steps"] == 20 for c in cards) and cards[0]["name"] != cards[1]["name"]
    handled("concurrency", "same name twice", ok)
    for d in dirs:
        load_checkpoint(hruns / d)


def test_cancel_within_a_second_keeps_a_partial_run_and_no_threads_are_left(hruns, tmp_path):
    reg = JobRegistry(max_jobs=2, eval_limit=100)
    jobs = [reg.submit(f"s{i}", [(f"long-{i}", TrainConfig(**{**TINY, "epochs": 1000}))], root=tmp_path)
            for i in range(2)]
    with pytest.raises(JobLimitError):
        reg.submit("s2", [("third", TrainConfig(**TINY))], root=tmp_path)
    for job in jobs:
        deadline = time.time() + 60
        while not job.snapshot().runs[0].progress and time.time() < deadline:
            time.sleep(0.02)
    stops = []
    for job in jobs:
        t0 = time.perf_counter()
        job.cancel()
        while job.snapshot().runs[0].phase == "training":
            time.sleep(0.005)
        stops.append(time.perf_counter() - t0)
    handled("concurrency", "cancel", max(stops) < 1.0)
    for job in jobs:
        assert job.join(60)
        run = job.snapshot().runs[0]
        card = read_card(run.run_dir)
        assert run.status == card["status"] == "cancelled" and 0 < card["steps"] < 1000 * 20
        load_checkpoint(run.run_dir)
    assert len({job.snapshot().runs[0].run_dir for job in jobs}) == 2
    reg.shutdown()
    for _ in range(3):                                       # start / finish again: threads do not pile up
        reg.submit("again", [("again", TrainConfig(**{**TINY, "epochs": 0.25}))], root=tmp_path).join(60)
    handled("concurrency", "no orphan threads", not [t for t in _ponder_threads() if t.name[11:] in
                                                     {j.id for j in reg._jobs.values()}])
    idle_registry()
    assert _ponder_threads() == []


# ============================================================================= divergence

def test_a_diverging_run_shows_as_failed_on_the_train_page(hruns):
    reg = idle_registry()
    at = open_page("pages/train.py")
    session = at.session_state["_session_id"]
    job = reg.submit(session, [("diverges", TrainConfig(**DIVERGING))], kind="train")
    assert job.join(60)
    run_ok(at)
    errs = one_line_errors(at)
    ok = len(errs) == 1 and "Failed" in errs[0] and "became inf at step 1" in errs[0]
    handled("divergence", "train page", ok and not at.exception)
    assert read_card(hruns / "diverges")["status"] == "failed"
    at.switch_page("pages/parity.py")
    run_ok(at)
    at.sidebar.selectbox(key="pick_model_parity").set_value("runs/diverges")
    run_ok(at)
    assert any("FAILED" in o for o in at.sidebar.selectbox(key="pick_model_parity").options)
    assert any("became inf" in w.value for w in at.sidebar.warning) and not at.exception


def test_a_diverging_run_shows_as_failed_in_the_sweep_results(hruns):
    reg = idle_registry()
    at = open_page("pages/sweep.py")
    session = at.session_state["_session_id"]
    specs = [("sweep-lp0.3", TrainConfig(**{**TINY, "lambda_p": 0.3})),
             ("sweep-lp0.9", TrainConfig(**{**DIVERGING, "lambda_p": 0.9}))]
    job = reg.submit(session, specs, kind="sweep")
    assert job.join(60)
    run_ok(at)
    df = at.dataframe[0].value
    ok = list(df["status"]) == ["completed", "failed"] and "became inf" in df["reason"].iloc[1]
    ok = ok and any("λp 0.9" in e and "failed" in e and "became inf" in e for e in one_line_errors(at))
    grid = charts(at)[1]
    ok = ok and any("became inf" in (a.get("text") or "") for a in grid["layout"].get("annotations", []))
    handled("divergence", "sweep results", ok and not at.exception)


# ============================================================================= the counts

def test_zz_bad_input_summary():
    lines = [f"{k}: {CLEAN[k]}/{TRIED[k]} handled cleanly" for k in sorted(TRIED)]
    print("\nbad inputs tried: %d, handled cleanly: %d\n  " % (sum(TRIED.values()), sum(CLEAN.values()))
          + "\n  ".join(lines))
    assert TRIED and CLEAN == TRIED
