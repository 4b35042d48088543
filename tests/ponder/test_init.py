"""ponder/__init__.py: the public face names the model, the unroll, the config, the task registry, train, run,
load_checkpoint and measure_test, each the object of the module that defines it, imported on first use."""
import subprocess
import sys

import pytest

import ponder
from helpers import ROOT


def test_each_public_name_is_the_object_its_module_defines():
    from ponder.analysis.unroll import measure_test
    from ponder.config import TrainConfig
    from ponder.halting import PonderNet
    from ponder.inference import ponder as unroll
    from ponder.store.checkpoint import load_checkpoint
    from ponder.tasks import TASKS, get_task, register
    from ponder.training.lifecycle import run
    from ponder.training.loop import train
    assert (ponder.PonderNet, ponder.ponder, ponder.TrainConfig, ponder.get_task, ponder.TASKS, ponder.register,
            ponder.train, ponder.run, ponder.load_checkpoint, ponder.measure_test) == \
        (PonderNet, unroll, TrainConfig, get_task, TASKS, register, train, run, load_checkpoint, measure_test)
    assert set(ponder.__all__) == set(ponder._HOMES) | {"__version__"} and set(ponder.__all__) <= set(dir(ponder))


def test_an_unknown_name_is_an_attribute_error_and_submodules_still_import():
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        ponder.trian
    from ponder import data, files                 # submodules, not public names: imported as modules
    assert data.__name__ == "ponder.data" and files.__name__ == "ponder.files"


@pytest.mark.long
def test_import_ponder_imports_no_torch_until_a_name_is_used():
    code = ("import sys, ponder; before = 'torch' in sys.modules; ponder.TrainConfig; light = 'torch' in sys.modules; "
            "ponder.PonderNet; print(before, light, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["False", "False", "True"], out.stderr
