"""The README's set-up, as a new user follows it top to bottom."""
import re

from paths import ROOT


def test_the_cpu_only_torch_is_installed_before_the_requirements_that_would_pull_the_cuda_build():
    setup = (ROOT / "README.md").read_text().split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = [c for block in re.findall(r"```bash\n(.*?)```", setup, re.S) for c in block.splitlines()]
    cpu = [i for i, c in enumerate(commands) if "download.pytorch.org/whl/cpu" in c]
    reqs = [i for i, c in enumerate(commands) if "pip install -r requirements.txt" in c]
    assert cpu and reqs and cpu[0] < reqs[0], commands
    pins = dict(re.findall(r"^(torch|torchvision)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M))
    assert all(f"{k}=={v}" in commands[cpu[0]] for k, v in pins.items()), (pins, commands[cpu[0]])  # the same pair


def test_the_set_up_fetches_mnist_with_a_command_that_exists_and_names_the_port_flag():
    import shlex
    from ponder.cli.args import build_parser
    setup = (ROOT / "README.md").read_text().split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = [c.split("  #")[0].strip() for block in re.findall(r"```bash\n(.*?)```", setup, re.S)
                for c in block.splitlines()]
    ponder = [c for c in commands if c.startswith("python -m ponder ")]
    assert "python -m ponder data --download" in ponder
    for c in ponder:                                               # each one is a command the CLI takes
        build_parser().parse_args(shlex.split(c)[3:])
    assert "streamlit run streamlit_app.py --server.port 8502" in commands
    assert "PyTorch package index" in setup and "runs on a CPU as well" in setup     # and what to do without it
