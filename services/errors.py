"""One exception hierarchy for the whole plugin.

Every error a caller can provoke is a ``BookuError``, which is a ``ValueError`` so that existing client plugins
that catch ``ValueError`` (as the original Booku documented) keep working.
"""

from __future__ import annotations


class BookuError(ValueError):
    """Root of every error Booku raises on purpose. Messages are Chinese and say what is allowed."""


class ValidationError(BookuError):
    """Bad input. Raised before anything is written."""


class NotFoundError(BookuError):
    """A referenced memory, memo or document does not exist (or is not visible in this scope)."""


class EmbeddingUnavailableError(BookuError):
    """The embedding provider cannot answer right now; callers fall back to keyword search."""


class VectorIndexUnavailableError(EmbeddingUnavailableError):
    """The vector index (Chroma) is broken, missing or being rebuilt; callers fall back to keyword search exactly as
    they do when the embedder is down, which is why this is an ``EmbeddingUnavailableError``."""


class ModelMismatchError(BookuError):
    """The vector index was built with another embedding model or dimension; run `reindex`."""


class ConfigError(BookuError):
    """A configuration key is unknown or out of range."""
