"""Run small linear-algebra steps on one BLAS thread.

Why: the EPA and novelty steps decompose matrices of a few dozen rows. With OpenBLAS's default of one thread per
core, such calls spend most of their time waking and spinning threads, and on a loaded machine a small SVD takes
many times longer than on one thread. The limit applies only inside the block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    with _controller.limit(limits=1, user_api="blas"):
        yield
