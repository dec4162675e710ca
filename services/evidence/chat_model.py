"""The chat model dreaming talks to: one small interface, two real providers.

* ``OpenAICompatibleChatModel`` posts to ``<base_url>/chat/completions`` of any OpenAI-compatible server (httpx, one
  long-lived client; the API key comes from an environment variable named in the config, never from the config
  file itself).
* ``HostChatModel`` wraps a callable the host adapter injects: the host's light LLM profile (Neo-MoFox
  ``llm_api`` with the ``utils_small`` task). This package never imports the host.

``build_chat_model`` picks one from the ``[dreaming]`` settings and says why when none is usable, so a stage can
report "unavailable" with the reason instead of skipping quietly. Failures of a call raise
``ChatModelUnavailableError``; the stage then leaves its high-water marks alone and retries on its next run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import httpx

from ..errors import BookuError
from .settings import DreamingSettings

logger = logging.getLogger(__name__)

ChatMessage = dict[str, str]
HostChatFn = Callable[[list[ChatMessage]], Awaitable[str]]
_ERROR_DETAIL_CHARS = 300


class ChatModelUnavailableError(BookuError):
    """The chat model cannot answer (not configured, unreachable, or an error answer)."""


@runtime_checkable
class ChatModel(Protocol):
    """What dreaming needs from a chat model."""

    model_id: str

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float) -> str:
        """The assistant's reply text to ``messages`` (``{"role": "system"|"user", "content": str}``)."""
        ...


class OpenAICompatibleChatModel:
    """``POST <base_url>/chat/completions`` (non-streaming). ``aclose()`` closes the HTTP client."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url or not base_url.strip():
            raise ChatModelUnavailableError("dreaming.openai_base_url 不能为空，应形如 http://127.0.0.1:8080/v1")
        if not model or not model.strip():
            raise ChatModelUnavailableError("dreaming.openai_model 不能为空，应填写聊天模型名")
        self.endpoint = base_url.strip().rstrip("/") + "/chat/completions"
        self.model = model.strip()
        self.model_id = f"openai/{self.model}"
        self.timeout = float(timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float) -> str:
        """The first choice's message content. Raises ChatModelUnavailableError on transport or protocol errors."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": int(max_tokens),
            "temperature": float(temperature),
            "stream": False,
        }
        try:
            response = await self._http().post(self.endpoint, json=payload)
        except httpx.TimeoutException as exc:
            raise ChatModelUnavailableError(
                f"聊天模型 {self.endpoint} 在 {self.timeout:g} 秒内没有响应，可调大 dreaming.openai_timeout_seconds"
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ChatModelUnavailableError(
                f"无法连接聊天模型 {self.endpoint}：{type(exc).__name__}: {exc}；请确认服务已启动且 "
                "dreaming.openai_base_url 正确"
            ) from exc
        if response.is_error:
            raise ChatModelUnavailableError(
                f"聊天模型 {self.endpoint} 返回 HTTP {response.status_code}：{_detail(response)}"
            )
        try:
            body = response.json()
            content = body["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ChatModelUnavailableError(
                f"聊天模型 {self.endpoint} 的回答不是 chat.completion 格式：{response.text[:_ERROR_DETAIL_CHARS]}"
            ) from exc
        if not isinstance(content, str):
            raise ChatModelUnavailableError(f"聊天模型 {self.endpoint} 的回答没有文本内容")
        return content

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout), headers=self._headers, transport=self._transport
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client; a later call opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class HostChatModel:
    """Adapter for the host's light LLM profile: ``complete_fn(messages) -> reply text`` (host_adapter/models.py)."""

    def __init__(self, complete_fn: HostChatFn, *, model_id: str = "host/utils_small") -> None:
        self._complete = complete_fn
        self.model_id = model_id

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float) -> str:
        """The host's reply; any host error becomes ChatModelUnavailableError (the host retries on its own)."""
        try:
            reply = await self._complete([dict(m) for m in messages])
        except ChatModelUnavailableError:
            raise
        except Exception as exc:  # the host raises its own LLM errors; the stage only needs "not now, and why"
            raise ChatModelUnavailableError(
                f"宿主轻量模型（{self.model_id}）调用失败：{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(reply, str):
            raise ChatModelUnavailableError(f"宿主轻量模型（{self.model_id}）没有返回文本")
        return reply


def build_chat_model(
    settings: DreamingSettings, *, host_chat_fn: HostChatFn | None = None
) -> tuple[ChatModel | None, str]:
    """``(model, "")`` for the configured provider, or ``(None, reason)`` when none is usable."""
    provider = settings.chat_provider
    if provider == "none":
        return None, "dreaming.chat_provider = none：没有配置聊天模型"
    if provider == "host":
        if host_chat_fn is None:
            return (
                None,
                f"宿主没有提供轻量模型（任务 {settings.host_task}）；独立运行时请改用 dreaming.chat_provider = openai",
            )
        return HostChatModel(host_chat_fn, model_id=f"host/{settings.host_task}"), ""
    api_key = os.environ.get(settings.openai_api_key_env, "").strip() or None
    try:
        return OpenAICompatibleChatModel(
            settings.openai_base_url, settings.openai_model, api_key, settings.openai_timeout_seconds
        ), ""
    except ChatModelUnavailableError as exc:
        return None, str(exc)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:_ERROR_DETAIL_CHARS] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return message[:_ERROR_DETAIL_CHARS]
    return str(body)[:_ERROR_DETAIL_CHARS]
