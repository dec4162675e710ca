"""Find the running configuration behind a service view, so the tools honour the operator's limits."""

from __future__ import annotations

from typing import Any

from ..config import BookuConfig


def config_of(service: Any, override: BookuConfig | None = None) -> BookuConfig:
    """``override`` when given, else ``service.runtime.config``, else the defaults.

    A service whose runtime is not started raises on ``.runtime``; the tools still need their limits (``help``
    works without storage), so any failure here falls back to the defaults.
    """
    if isinstance(override, BookuConfig):
        return override
    try:
        config = getattr(getattr(service, "runtime", None), "config", None)
    except Exception:  # a view without a started runtime raises RuntimeError from the property
        config = None
    return config if isinstance(config, BookuConfig) else BookuConfig()


__all__ = ["config_of"]
