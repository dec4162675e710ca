"""Embedding providers behind one ``Embedder`` interface, plus the cache that fronts them.

``build_embedder`` picks a provider from config; the runtime wraps it in ``CachedEmbedder``. The deterministic and
unavailable embedders exist for tests only.
"""

from .base import EMBEDDING_MODES, Embedder, EmbeddingMode, l2_normalise, resolve_dimension
from .cached import CachedEmbedder, EmbeddingCacheStore, text_hash
from .deterministic import DeterministicTestEmbedder, UnavailableEmbedder
from .factory import build_embedder
from .host import EmbeddingRequestFn, HostEmbedder
from .local import LOCAL_DIMENSION, LOCAL_MODEL_ID, LocalE5Embedder
from .openai_compat import OpenAICompatibleEmbedder

__all__ = [
    "EMBEDDING_MODES",
    "LOCAL_DIMENSION",
    "LOCAL_MODEL_ID",
    "CachedEmbedder",
    "DeterministicTestEmbedder",
    "Embedder",
    "EmbeddingCacheStore",
    "EmbeddingMode",
    "EmbeddingRequestFn",
    "HostEmbedder",
    "LocalE5Embedder",
    "OpenAICompatibleEmbedder",
    "UnavailableEmbedder",
    "build_embedder",
    "l2_normalise",
    "resolve_dimension",
    "text_hash",
]
