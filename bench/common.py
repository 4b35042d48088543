"""What every benchmark shares: the machine record, thread settings, MNIST, timers, JSON output.

Every JSON file a benchmark writes has the same envelope:
    {"name": ..., "quick": bool, "machine": {...}, "config": {...}, "results": {...}}
and `python -m bench report` renders docs/benchmarks.md from those files only.
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "docs" / "bench"          # small JSON files, committed next to docs/benchmarks.md
DOC_PATH = ROOT / "docs" / "benchmarks.md"
ASSETS = ROOT / "assets"


QUICK_DIR = Path(tempfile.gettempdir()) / "ponder-bench-quick"   # --quick results never overwrite docs/bench


def default_out(name: str, quick: bool = False) -> Path:
    return (QUICK_DIR if quick else RESULTS_DIR) / f"{name}.json"


# ----------------------------------------------------------------------------- machine

def set_threads(threads: Optional[int] = None) -> int:
    """Intra-op threads: `threads` when given, else the cores the load average leaves free, at most 8
    (ponder.training.progress.free_threads, as the CLI's training chooses them: on a 2-core machine with other work
    running, 2 threads ran 1.5-2.7x slower than 1). Interop threads are left alone (nothing here runs
    independent ops in parallel). Returns the number in use.
    """
    from ponder.training.progress import free_threads
    n = threads or min(free_threads(), 8)
    torch.set_num_threads(max(1, int(n)))
    return torch.get_num_threads()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> Optional[str]:
    """HEAD's short hash, with '+changes' when the working tree differs from it (read-only git calls)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (head + ("+changes" if dirty else "")) or None
    except (OSError, subprocess.SubprocessError):
        return None


def loadavg() -> Optional[list]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _cpu_snapshot() -> Optional[tuple]:
    """(busy CPU seconds of the whole machine, CPU seconds of this process and its children, wall)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)          # idle + iowait
    busy = (sum(fields[:8]) - idle) / hz                               # user .. steal
    t = os.times()
    return busy, t.user + t.system + t.children_user + t.children_system, time.monotonic()


def other_work_share(start: Optional[tuple]) -> Optional[float]:
    """Fraction of the machine's CPU capacity used by *other* processes since `start` (0..1): how
    much the benchmark had to share the cores."""
    end = _cpu_snapshot()
    if start is None or end is None or end[2] <= start[2]:
        return None
    other = (end[0] - start[0]) - (end[1] - start[1])
    return round(min(max(other / ((end[2] - start[2]) * (os.cpu_count() or 1)), 0.0), 1.0), 3)


def command_line() -> str:
    return " ".join(["python -m bench", *sys.argv[1:]]) if sys.argv and sys.argv[0].endswith("__main__.py") \
        else " ".join(sys.argv)


def machine_info(device: str = "cpu") -> dict:
    """Where and when a benchmark ran: CPU, cores, threads, load, torch, GPU if any, date, commit."""
    info = {
        "_cpu_start": _cpu_snapshot(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "loadavg_start": loadavg(),         # 1, 5, 15 minute load averages (os.getloadavg())
        "git_commit": _git_commit(),
        "command": command_line(),
    }
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


# ----------------------------------------------------------------------------- data

def data_dir(given: Optional[str] = None) -> str:
    from ponder.data import default_data_dir
    return given or default_data_dir()


def load_mnist(data_dir_: Optional[str] = None):
    from ponder.data import load_mnist as _load
    return _load(data_dir(data_dir_), download=False)


# ----------------------------------------------------------------------------- timing

def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}   # "cpu": this process's CPU time, for one thread


def best_of(fn: Callable[[], None], repeats: int, device="cpu", clock: str = "wall") -> float:
    """Smallest time of `repeats` calls of fn (seconds): the least disturbed by other work. clock "cpu" counts
    the process's CPU time, not the wall's: with one torch thread on a machine other work keeps busy, the time
    spent waiting for a core then drops out (with more threads it sums them, so it is not a wall time)."""
    now = CLOCKS[clock]
    times = []
    for _ in range(max(1, repeats)):
        sync(device)
        t0 = now()
        fn()
        sync(device)
        times.append(now() - t0)
    return min(times)


def summary_ms(seconds) -> dict:
    """p50 / p95 / mean / max of a list of durations, in milliseconds."""
    ms = [s * 1000.0 for s in seconds]
    p50, p95 = np.percentile(ms, [50, 95]) if ms else (float("nan"), float("nan"))
    return {"n": len(ms), "p50_ms": float(p50), "p95_ms": float(p95),
            "mean_ms": statistics.fmean(ms) if ms else float("nan"), "max_ms": max(ms) if ms else float("nan")}


# ----------------------------------------------------------------------------- output

def _plain(obj):
    if is_dataclass(obj) and not isinstance(obj, type):
        return _plain(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        return _plain(obj.tolist())
    return obj


def write_result(name: str, out: Optional[Path], quick: bool, machine: dict, config, results: dict) -> dict:
    """Write the JSON envelope (atomically) and return it."""
    machine = dict(machine)
    machine["loadavg_end"] = loadavg()
    machine["other_work_cpu_share"] = other_work_share(machine.pop("_cpu_start", None))
    doc = _plain({"name": name, "quick": bool(quick), "machine": machine, "config": config, "results": results})
    path = Path(out) if out else default_out(name, quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path}")
    return doc


def print_table(headers, rows, title: str = "") -> None:
    """A plain fixed-width table on stdout."""
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)
