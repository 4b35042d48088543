"""The server process's C heap: what a page run freed is handed back to the system after the run.

glibc's malloc keeps freed memory in the arena it came from for that arena's later allocations, and makes up to
8 arenas per core (16 on 2 cores) for threads that allocate at once: the server's web threads make them while a
browser loads the page's files, before the app's first run. Streamlit runs each session's script in a thread of
its own, on whichever arena is free, so each arena's high-water mark (model inputs, traces, figures, images)
stayed resident: ~3 MiB a drawing session over the first ten. malloc_trim(0) returns the free pages of every
arena (0.1 ms with nothing to return, ~2 ms after a page run). MALLOC_ARENA_MAX=2 in the server's environment
keeps it to two arenas from its start (flatter still); a cap set from the app (mallopt) comes after the web
threads made theirs and changes nothing. Nothing is done without glibc.
"""
from __future__ import annotations

import ctypes


def release_freed() -> bool:
    """Hand the heap's free pages back to the system (glibc's malloc_trim); False where there is no glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        return True
    except (OSError, AttributeError):
        return False
