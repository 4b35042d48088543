"""pyproject.toml: the `ponder` command is `python -m ponder`, and the package's pins are requirements.txt's."""
import importlib.metadata
import importlib.util
import os
import re
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import ponder.cli.main
from helpers import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(name):
    """The requirement lines of a requirements file, comments and spaces dropped."""
    lines = (re.sub(r"#.*", "", line).strip() for line in (ROOT / name).read_text().splitlines())
    return sorted(line.replace(" ", "") for line in lines if line)


def test_the_ponder_command_runs_the_main_that_python_m_ponder_runs(monkeypatch):
    entry = importlib.metadata.EntryPoint("ponder", PROJECT["scripts"]["ponder"], "console_scripts")
    assert entry.load() is ponder.cli.main.main
    called = []
    monkeypatch.setattr(ponder.cli.main, "main", lambda argv=None: called.append(argv) or 7)
    monkeypatch.delitem(sys.modules, "ponder.__main__", raising=False)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("ponder", run_name="__main__")             # python -m ponder
    assert called == [None] and exit_.value.code == 7               # its exit status is main's return value


def test_the_package_pins_are_the_requirements_files():
    extras = PROJECT["optional-dependencies"]
    assert sorted(PROJECT["dependencies"] + extras["explorer"] + extras["test"]) == requirements("requirements.txt")
    assert sorted(extras["ray"]) == requirements("requirements-ray.txt")


def _can_build_offline() -> bool:
    """This interpreter has pip and a setuptools that builds an editable wheel by itself (bdist_wheel is
    part of setuptools from 70.1; before, it needs the wheel package)."""
    try:
        setuptools = importlib.metadata.version("setuptools")            # read, not imported (its distutils hook)
    except importlib.metadata.PackageNotFoundError:
        return False
    version = tuple(int(p) for p in re.findall(r"\d+", setuptools)[:2])
    if importlib.util.find_spec("pip") is None:
        return False
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.skipif(not _can_build_offline(), reason="needs pip and setuptools >= 70.1 (or wheel) to build offline")
def test_an_editable_install_gives_a_working_ponder_command(tmp_path):
    """Offline: the venv sees the packages of the interpreter running the suite (its pip, setuptools and, where it has
    it, wheel), no index. It sees them through a .pth file of that interpreter's site folders, not through
    --system-site-packages: a venv sees its *base* Python's packages that way, so a suite run from a venv whose base
    Python has an older setuptools and no wheel built with those ('invalid command bdist_wheel'), whatever the
    suite's own environment held."""
    import site
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    seen = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
    (Path(own) / "suite-packages.pth").write_text("".join(p + "\n" for p in seen))
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
                    "-e", str(ROOT)], check=True, cwd=tmp_path, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([venv / "bin" / "ponder", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "train" in out.stdout and "evaluate" in out.stdout
    where = subprocess.run([python, "-c", "import ponder; print(ponder.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True).stdout.strip()
    assert where == str(ROOT / "ponder" / "__init__.py")                # the clone's sources, editable
