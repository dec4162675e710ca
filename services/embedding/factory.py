"""Pick the embedding provider named by the ``[embedding]`` config section.

The runtime wraps whatever this returns in a ``CachedEmbedder``; ``None`` means "no vectors at all", and every
search then runs on keywords only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .base import Embedder
from .host import EmbeddingRequestFn, HostEmbedder
from .local import LocalE5Embedder
from .openai_compat import OpenAICompatibleEmbedder

if TYPE_CHECKING:
    from ...config.schema import EmbeddingSection

PROVIDERS = ("local", "openai", "host", "none")


def build_embedder(
    config: EmbeddingSection,
    *,
    host_request_fn: EmbeddingRequestFn | None = None,
    host_model_id: str | None = None,
) -> Embedder | None:
    """Return the configured provider (not yet loaded or connected), or ``None`` for ``provider = "none"``.

    ``host_request_fn`` is required for ``provider = "host"`` and only the host adapter can supply it.
    ``host_model_id`` names the host's embedding model for cache and index keys; it defaults to
    ``"host/<host_task>"``, which stays the same if the host's model is swapped — the dimension check catches
    that only when the dimension changes, so the adapter should pass the real model identifier.
    The OpenAI API key is read from the environment variable named by ``openai_api_key_env`` (may be unset for
    servers without authentication). Raises ``ConfigError`` for an unusable combination.
    """
    provider = config.provider
    if provider == "none":
        return None
    if provider == "local":
        return LocalE5Embedder(
            batch_size=config.batch_size,
            num_threads=config.local_threads or None,
            engine=config.local_engine,  # type: ignore[arg-type]
        )
    if provider == "openai":
        api_key = os.environ.get(config.openai_api_key_env, "").strip() if config.openai_api_key_env else ""
        return OpenAICompatibleEmbedder(
            base_url=config.openai_base_url,
            model=config.openai_model,
            api_key=api_key or None,
            timeout=config.openai_timeout_seconds,
            batch_size=config.batch_size,
        )
    if provider == "host":
        if host_request_fn is None:
            raise ConfigError(
                '配置项 embedding.provider = "host" 只能在宿主插件中使用（需要宿主的嵌入接口）；'
                '独立运行时请改为 "local"、"openai" 或 "none"。'
            )
        return HostEmbedder(
            host_request_fn,
            model_id=host_model_id or f"host/{config.host_task}",
            batch_size=config.batch_size,
        )
    raise ConfigError(f"配置项 embedding.provider 的值 {provider!r} 无效，可选: {', '.join(PROVIDERS)}")
