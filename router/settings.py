"""What one dashboard app needs to know besides the runtime: its key, its CORS origins, sizes and limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .auth import configured_api_key

if TYPE_CHECKING:
    from ..config.schema import BookuConfig


@dataclass(frozen=True)
class DashboardSettings:
    """Resolved dashboard settings.

    ``api_key`` must be non-empty: there is no unauthenticated mode. ``allowed_origins`` lists the only foreign
    origins CORS answers for (empty = same-origin only; ``*`` is refused). ``max_body_bytes`` caps every request
    body; ``max_upload_bytes`` caps an uploaded document's text, and the routes taking documents accept a body of
    ``max_upload_body_bytes`` (twice that plus framing: JSON may escape each CJK character as six bytes).
    """

    api_key: str
    allowed_origins: tuple[str, ...] = ()
    session_hours: float = 12.0
    page_size: int = 20
    max_upload_bytes: int = 5 * 1024 * 1024
    max_body_bytes: int = 1024 * 1024

    @property
    def max_upload_body_bytes(self) -> int:
        """The body cap of the routes that take a document (multipart framing or JSON escaping included)."""
        return 2 * self.max_upload_bytes + 64 * 1024

    @classmethod
    def from_config(cls, config: BookuConfig, *, api_key: str | None = None) -> DashboardSettings:
        """Settings from the ``[dashboard]`` section; ``api_key`` (e.g. from ``ensure_api_key``) wins if given."""
        section = config.dashboard
        return cls(
            api_key=(api_key or configured_api_key(config)).strip(),
            allowed_origins=tuple(origin.strip() for origin in section.allowed_origins if origin.strip()),
            session_hours=float(section.session_hours),
            page_size=int(section.page_size),
            max_upload_bytes=int(section.max_upload_kb) * 1024,
            max_body_bytes=int(section.max_body_kb) * 1024,
        )
