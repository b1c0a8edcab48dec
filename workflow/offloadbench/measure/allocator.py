"""The C allocator's state in a measuring process: where glibc's malloc gets large blocks.

glibc serves a block at or above its mmap threshold with fresh pages from the kernel, and
gives the top of its heap back once more than its trim threshold lies free there. Both
thresholds start low (128 KiB) and rise as the process frees large blocks, up to 32 MiB.
So whether a call maps fresh pages (a minor page fault per 4 KiB, each zeroed by the
kernel) depends on every block the process freed before: a worker that measured a large
cell first runs the next cell's calls from its heap, a fresh one maps and zeroes every
temporary on every call. Between two processes of one cell this moved times by 2 to 3
times on our test machine (torch's heat step at n = 1024: 2.8 ms with 1,024 fresh pages
per call, 0.9 ms without), which no pairing in time can cancel.

`measure.allocator` chooses the state:
- steady (the default): the mmap threshold held at 32 MiB, where it settles in a
  long-running program once it has freed one large array, and the heap never given back
  (no trimming), in every worker from its start, so every process of a cell maps the same
  pages whatever it measured before. Only blocks of 32 MiB and more still come as fresh
  pages, in every process alike. With glibc's trim threshold of 64 MiB instead, a call
  whose temporaries reach past it at the top of the heap gives them back at its end and
  maps them afresh at its next start, or not, whichever small allocation happens to sit
  above them: torch's heat step at n = 2048 ran 65-72 ms with 20,448 fresh pages per call
  in 5 of 6 fresh processes and 22 ms without in the sixth (which one depended on Python's
  hash seed); never trimming, all six ran 22-25 ms.
- adaptive: glibc's own rising thresholds. A process's first large calls map fresh pages,
  then its threshold rises past them and they come from the heap, or not, with its
  history: NumPy's fft2 at n = 1024 ran 14.7 ms with no fresh pages in three processes of
  one run and 21-28 ms with 2,519 per call in the other three.
The fresh pages each call maps are counted in both (`faults_per_call`). Where a block lands
on the heap still depends on what the process allocated before; each cell is measured in
a process of its own for that (jobs/worker.py).
"""

from __future__ import annotations

import functools

STEADY, ADAPTIVE = "steady", "adaptive"
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest dynamic mmap threshold on 64-bit hosts
TRIM_THRESHOLD = 2**62  # never reached: the heap, once grown, is kept


def allocator_env(mode: str) -> dict[str, str]:
    """The variables that put a process's glibc malloc in `mode`'s state (read by glibc at
    start-up; other C libraries ignore them)."""
    if mode != STEADY:
        return {}
    return {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}


@functools.cache
def _mallinfo2():
    """glibc's mallinfo2(), made once (None off glibc or before 2.33)."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    try:
        function = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = MallInfo2
    return function


def heap_bytes() -> int | None:
    """How much the C heap holds from the system (glibc's `arena`: what it took with sbrk),
    None where that cannot be read. A call that makes it grow is still building the heap
    its later calls reuse: torch's output of a 1024² matmul, aligned by posix_memalign,
    took 4 MiB of fresh heap for each of its first 8 calls here (1,024 fresh pages each,
    25% slower), then none."""
    mallinfo2 = _mallinfo2()
    return int(mallinfo2().arena) if mallinfo2 else None
