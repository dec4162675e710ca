"""Typed configuration: ``BookuConfig`` and ``load_config``."""

from .loader import config_from_mapping, load_config, validate_config
from .schema import BookuConfig

__all__ = ["BookuConfig", "load_config", "config_from_mapping", "validate_config"]
