"""The streamable HTTP app: the SDK's own transport and bearer-token middleware, one static token.

The SDK checks bearer tokens through a ``TokenVerifier`` (``BearerAuthBackend`` + ``RequireAuthMiddleware``): a
missing or wrong token gets ``401`` with ``WWW-Authenticate: Bearer error="invalid_token"`` before any MCP message is
read. Its ``AuthSettings`` are OAuth-shaped and require an issuer URL; with a single pre-shared token this server is
its own issuer, so that URL is the server's own loopback address, and no OAuth metadata routes are published
(``resource_server_url`` is left unset). Wrong tokens are slowed down by a ``GuessThrottle`` of their own (this is
another secret than the dashboard key); the right token is never delayed.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from ..router.throttle import GuessThrottle
from .settings import HTTP_HOST, HTTP_PATH
from .token import tokens_equal

CLIENT_ID = "booku-mcp-client"


class StaticTokenVerifier:
    """Accepts exactly one token (compared in constant time); every other token is refused, after the throttle."""

    def __init__(self, token: str, guesses: GuessThrottle | None = None) -> None:
        if not token:
            raise ValueError("MCP 令牌不能为空")
        self._token = token
        self.guesses = guesses or GuessThrottle()

    async def verify_token(self, token: str) -> AccessToken | None:
        """Access info for the configured token, ``None`` (→ 401) for anything else once the throttle lets it."""
        if not tokens_equal(token, self._token):
            await self.guesses.penalise()
            return None
        return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])


def endpoint_url(port: int) -> str:
    """Where clients connect: ``http://127.0.0.1:<port>/mcp``."""
    return f"http://{HTTP_HOST}:{port}{HTTP_PATH}"


def http_app(server: Server[Any], *, token: str, port: int) -> Starlette:
    """The ASGI app serving ``server`` at ``/mcp`` on loopback, every request requiring ``Authorization: Bearer``.

    The SDK also turns on its DNS-rebinding protection for a loopback host (only ``Host: 127.0.0.1|localhost``
    and local origins pass), so a web page in the operator's browser cannot reach the server through a rebound
    name even before the token is checked.
    """
    auth = AuthSettings(issuer_url=AnyHttpUrl(f"http://{HTTP_HOST}:{port}"), resource_server_url=None)
    return server.streamable_http_app(
        streamable_http_path=HTTP_PATH, host=HTTP_HOST, auth=auth, token_verifier=StaticTokenVerifier(token)
    )
