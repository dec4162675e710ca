"""Booku Memory: long-term memory for LLM chat bots.

Standalone use::

    import booku_memory
    async with booku_memory.open("data") as memory:
        service = memory.get_service("booku_memory:service:booku_memory")

Inside the Neo-MoFox host the plugin is loaded from ``plugin.py`` (see manifest.json); this module never imports the
host framework.
"""

from .services.errors import BookuError, ValidationError
from .standalone import KNOWLEDGE_SERVICE, MEMORY_SERVICE, MemoryHandle, get_service
from .standalone import open_memory as open

__version__ = "2.0.0"
__all__ = [
    "open",
    "get_service",
    "MemoryHandle",
    "BookuError",
    "ValidationError",
    "MEMORY_SERVICE",
    "KNOWLEDGE_SERVICE",
    "__version__",
]
