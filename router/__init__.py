"""The admin dashboard: a FastAPI app with a JSON API under ``/api`` and server-rendered Jinja2 pages.

``create_dashboard_app(runtime_provider, settings=DashboardSettings(...))`` builds it; the standalone ``serve``
runs it as the root app and the host adapter mounts it at ``/booku-memory``.
"""

from .app import create_dashboard_app
from .auth import ensure_api_key
from .settings import DashboardSettings

__all__ = ["DashboardSettings", "create_dashboard_app", "ensure_api_key"]
