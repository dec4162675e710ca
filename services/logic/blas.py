"""Run small linear-algebra steps on one BLAS thread.

Why: the EPA and novelty steps decompose matrices of a few dozen rows. With OpenBLAS's default of one thread per
core, such calls spend most of their time waking and spinning threads, and on a loaded 2-core machine an SVD of a
50×384 matrix was measured at 358 ms instead of 4.7 ms single-threaded. The limit applies only inside the block.

The thread count is process-wide, and the event loop, the SQLite writer's thread (novelty checks) and the model's
thread (the local encoder) enter blocks at the same time. A block restores only a count it changed itself:
``threadpoolctl``'s ``limit`` restored the count it found, so of two overlapping blocks the one leaving last
"restored" one thread for good. Reading the count and setting it directly also costs ~3 µs against ~30 µs for
``threadpoolctl``'s limiter object (twice per retrieval, once per write batch).

OpenBLAS (0.3.31, pthreads) ignores a change of the count from another thread once the main thread has changed it,
so a counted, shared limit (first in sets, last out restores) would leave the event loop unlimited whenever another
thread entered first; each block sets the limit for itself.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from threadpoolctl import ThreadpoolController

_libraries: list[Any] | None = None


def _blas_libraries() -> list[Any]:
    """The loaded BLAS libraries' controllers, found once (numpy loads its BLAS at import, before any block)."""
    global _libraries
    if _libraries is None:
        _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libraries


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    changed = [(library, threads) for library in _blas_libraries() if (threads := library.get_num_threads()) != 1]
    for library, _ in changed:
        library.set_num_threads(1)
    try:
        yield
    finally:
        for library, threads in changed:
            library.set_num_threads(threads)
