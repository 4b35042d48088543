"""explorer.heap: freed memory handed back, measured in a fresh process (its resident set, /proc/self/status)."""
import subprocess
import sys

import pytest

from paths import ROOT

# Four threads each allocate 300 blocks of 64 KB through malloc (bytearrays; under glibc's 128 KB mmap threshold, so
# from the arenas) and free all but a small last one, which keeps each arena's top from being trimmed on its own:
# freed but resident, until release_freed.
SCRIPT = """
import sys, threading
from explorer import heap
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024
kept = []
def work():
    blocks = [bytearray(65536) for _ in range(300)]
    kept.append(bytearray(1000))
    del blocks
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
before = rss()
if sys.argv[1] == "release":
    assert heap.release_freed()
print(before - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_memory_freed_by_threads_leaves_the_resident_set():
    def returned(mode: str) -> float:                 # MiB the resident set fell by
        out = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return float(out.stdout)
    assert returned("keep") < 2              # freed, but kept in the arenas
    assert returned("release") > 10          # handed back (24 MiB here: the threads reuse each other's arenas)
