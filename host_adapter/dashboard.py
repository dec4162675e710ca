"""The ``memory_admin`` router: the dashboard app mounted on the host's HTTP server."""

from pathlib import Path

from src.app.plugin_system.base import BaseRouter

from ..config import BookuConfig
from ..router.app import create_dashboard_app
from ..router.auth import API_KEY_FILE_NAME, configured_api_key, ensure_api_key
from ..router.settings import DashboardSettings
from . import logger

ROUTE_PATH = "/booku-memory"


class MemoryAdminRouter(BaseRouter):
    """``memory_admin``: the dashboard (pages + JSON API) at ``/booku-memory`` on the host's HTTP server.

    The dashboard enforces its own authentication (``X-API-Key`` or a login session, CSRF on forms) because the
    host's routers are public by default; the key comes from ``[dashboard] api_key``, its environment variable, or
    ``<data_dir>/dashboard_api_key`` (generated once). CORS is the dashboard's job too, so the host adds none.
    """

    router_name = "memory_admin"
    router_description = "Booku 记忆管理后台与 JSON API"
    custom_route_path = ROUTE_PATH
    cors_origins = None

    def register_endpoints(self) -> None:
        plugin = self.plugin
        config: BookuConfig = plugin.booku_config
        settings = DashboardSettings.from_config(config, api_key=ensure_api_key(plugin.data_dir, config))
        key_source = (
            "配置 [dashboard] api_key 或环境变量"
            if configured_api_key(config)
            else (f"文件 {Path(plugin.data_dir) / API_KEY_FILE_NAME}")
        )
        logger.info(f"管理后台挂载在宿主 HTTP 服务的 {ROUTE_PATH}，登录密钥见{key_source}")
        dashboard = create_dashboard_app(plugin.running_runtime, settings=settings)
        # The wrapper app's automatic /docs and /openapi.json would be served without authentication; the dashboard
        # disables its own, so drop the wrapper's too and leave only the mount.
        hidden = {self.app.docs_url, self.app.redoc_url, self.app.openapi_url, self.app.swagger_ui_oauth2_redirect_url}
        self.app.router.routes[:] = [r for r in self.app.router.routes if getattr(r, "path", None) not in hidden]
        self.app.mount("/", dashboard)
