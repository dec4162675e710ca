"""Companion memory (breath, hold, grow, trace, dream, anchor, release, pulse) on top of the memory records."""

from .decay_engine import refresh_decay
from .service import BookuCompanionService

__all__ = ["BookuCompanionService", "refresh_decay"]
