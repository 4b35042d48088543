"""The server process's C heap: a few malloc arenas shared by all threads, not one per thread.

glibc's malloc gives a thread that allocates while the existing arenas are held by other live threads an arena of
its own, up to 8 per core (16 on 2 cores), and keeps what is freed in an arena for that arena's later use.
Streamlit runs each session's script run in a thread of its own, so the server's resident memory grew by each
new arena's high-water mark over the first dozen drawing sessions and stayed there. Capped at ARENAS, later
threads share those arenas, and what one session freed serves the next. (The environment variable
MALLOC_ARENA_MAX does the same for a process started with it; this needs no change to how the server is started.)
Nothing is done where the C library is not glibc.
"""
from __future__ import annotations

import ctypes

ARENAS = 2             # malloc arenas for the whole process (glibc's default: 8 per core)
M_ARENA_MAX = -8       # mallopt's parameter number for the arena cap (glibc's malloc.h)


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap the process's malloc arenas (glibc's mallopt(M_ARENA_MAX)); True where it was set. Arenas made before
    stay; threads beyond the cap share them."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, int(arenas)))
    except (OSError, AttributeError):       # not glibc
        return False
