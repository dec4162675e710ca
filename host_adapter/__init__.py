"""The Neo-MoFox host adapter's parts: with ``plugin.py`` the only modules that import the host framework (``src.*``).

``config_bridge`` (the host's pydantic config generated from ``BookuConfig``), ``models`` (embeddings and the
dreaming chat model through the host's model tasks), ``services`` and ``dashboard`` (the host components over the
plugin's runtime), ``tools`` (one host tool class per LLM tool) and ``events`` (the event handlers). ``plugin.py``
registers the plugin class that owns the runtime and lists these components.
"""

from pathlib import Path

from src.app.plugin_system.api import log_api

from ..manifest_tools import load_plugin_toml

logger = log_api.get_logger("booku_memory", display="Booku记忆")

PLUGIN_TOML = load_plugin_toml(Path(__file__).resolve().parent.parent / "plugin.toml")["plugin"]
PLUGIN_NAME: str = PLUGIN_TOML["name"]
PLUGIN_VERSION: str = PLUGIN_TOML["version"]
