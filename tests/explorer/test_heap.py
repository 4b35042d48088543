"""explorer.heap: the malloc arena cap, counted with glibc's malloc_info in a fresh process."""
import subprocess
import sys

import pytest

from paths import ROOT

# Eight threads alive at once, each allocating through malloc (bytearrays of 64 KB are not Python's small-object
# allocator's); then glibc's malloc_info lists one <heap> per arena.
SCRIPT = """
import ctypes, sys, tempfile, threading
from explorer import heap
if sys.argv[1] == "cap":
    assert heap.cap_arenas(2)
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    keep = [bytearray(65536) for _ in range(16)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile() as f:
    fp = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(open(f.name).read().count("<heap nr="))
"""


def arenas(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_threads_share_at_most_the_capped_arenas():
    assert arenas("none") > 2                 # glibc's default: a new arena for a thread that finds all held
    assert arenas("cap") <= 2
