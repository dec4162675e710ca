"""Slows down guessing of one secret (the dashboard key, the MCP token) without ever refusing the right one.

A throttle keyed by client address cannot work here: every local client (the operator's browser, scripts, an
attacker's process) shares 127.0.0.1, so locking an address out locks the operator out too. So the throttle counts
wrong guesses per credential surface, whoever sends them, and only ever delays *wrong* guesses: the right secret is
checked first and passes at once, however many wrong ones are waiting. Past a small free budget, wrong answers are
given one at a time with a growing pause, so many parallel connections guess no faster than one.

Kept in memory on purpose: a restart resets it, which is harmless next to a key of at least 24 random characters;
it exists to stop a flood, not a patient attacker (the key length does that).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque


class GuessThrottle:
    """Wrong guesses of one secret: free up to ``free_failures`` per ``window_seconds``, then answered one at a time,
    each after ``base_delay`` doubling per further failure up to ``max_delay``."""

    MAX_TRACKED = 4096  # beyond this many failures in the window the delay is at its maximum anyway

    def __init__(
        self,
        *,
        free_failures: int = 10,
        window_seconds: float = 300.0,
        base_delay: float = 0.25,
        max_delay: float = 2.0,
    ) -> None:
        self.free_failures = free_failures
        self.window_seconds = window_seconds
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: deque[float] = deque(maxlen=self.MAX_TRACKED)
        self._lock = asyncio.Lock()

    def recent_failures(self) -> int:
        """Wrong guesses within the window (what the next delay is computed from)."""
        horizon = time.monotonic() - self.window_seconds
        while self._failures and self._failures[0] < horizon:
            self._failures.popleft()
        return len(self._failures)

    def delay_for(self, failures: int) -> float:
        """The pause before answering the ``failures``-th wrong guess of the window (0 within the free budget)."""
        excess = failures - self.free_failures
        if excess <= 0:
            return 0.0
        return min(self.base_delay * 2 ** min(excess - 1, 30), self.max_delay)

    async def penalise(self) -> None:
        """Count one wrong guess and return only when its answer may be given.

        Waiting happens under one lock per surface, so the surface answers at most one wrong guess per
        ``max_delay`` seconds once the budget is used, however many connections guess at once.
        """
        failures = self.recent_failures() + 1
        self._failures.append(time.monotonic())
        delay = self.delay_for(failures)
        if delay <= 0:
            return
        async with self._lock:
            await asyncio.sleep(delay)
