"""The one interface every embedding provider implements, plus the small helpers they share.

Providers differ in where vectors come from (an in-process model, an HTTP server, the host framework); callers
must not care. So every provider returns the same thing — an ``(n, d)`` float32 matrix with unit-length rows —
and every failure is an ``EmbeddingUnavailableError`` whose Chinese message says why, which lets the services
fall back to keyword search and report ``degraded`` instead of crashing a conversation turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError

EmbeddingMode = Literal["query", "passage"]
"""E5-style models embed a search query and a stored passage differently; every cache key carries the mode."""

EMBEDDING_MODES: tuple[EmbeddingMode, ...] = ("query", "passage")


@runtime_checkable
class Embedder(Protocol):
    """What the runtime needs from an embedding provider.

    ``dimension`` is the vector length; a provider that learns it from its first answer reports 0 until then
    (see ``resolve_dimension``). Providers that hold resources also offer ``async aclose()``; it is not part of
    the protocol because test doubles have nothing to close.
    """

    @property
    def model_id(self) -> str:
        """Identifies the model and its settings; it keys the embedding cache and the vector index."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length (0 while a provider has not learnt it yet)."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored passages. Returns an ``(len(texts), dimension)`` float32 matrix, rows L2-normalised."""
        ...

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries. Returns an ``(len(texts), dimension)`` float32 matrix, rows L2-normalised."""
        ...


class PassageEmbedder(Protocol):
    """What the outbox drain needs: passage vectors for the texts it writes (the runtime, through its cache)."""

    async def embed_documents(self, texts: list[str]) -> Any:
        """Embed stored passages: an ``(len(texts), dimension)`` matrix."""
        ...


def l2_normalise(matrix: Any) -> np.ndarray:
    """Scale every row of ``matrix`` to unit length and return it as a new float32 ``(n, d)`` array.

    Cosine similarity then is a plain dot product. An all-zero row stays zero instead of becoming NaN, so one
    degenerate vector cannot poison a whole similarity computation. A 1-d input is treated as a single row.
    """
    array = np.array(matrix, dtype=np.float32, copy=True)
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2:
        raise ValueError(f"l2_normalise expects a 2-d matrix, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    np.divide(array, norms, out=array, where=norms > 0)
    return array


def text_list(texts: Sequence[str]) -> list[str]:
    """Return ``texts`` as a list of strings, refusing a bare string.

    A bare ``str`` is itself a sequence of characters; passing one by mistake would silently embed every
    character separately, so it is rejected with a message naming the parameter.
    """
    if isinstance(texts, (str, bytes)):
        raise ValidationError("texts 必须是字符串列表（list[str]），不能是单个字符串；单条文本请写成 [text]。")
    items = list(texts)
    for position, item in enumerate(items):
        if not isinstance(item, str):
            raise ValidationError(
                f"texts[{position}] 必须是字符串，实际为 {type(item).__name__}；texts 只接受 list[str]。"
            )
    return items


def checked_batch_size(size: int) -> int:
    """Return ``size`` if it is a usable batch size (an int >= 1), else raise ``ValidationError``."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValidationError(f"batch_size 必须是不小于 1 的整数，实际为 {size!r}。")
    return size


def batches(items: Sequence[str], size: int) -> Iterator[list[str]]:
    """Yield consecutive slices of at most ``size`` items, in order."""
    checked_batch_size(size)
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def empty_matrix(dimension: int) -> np.ndarray:
    """The answer to an empty request: zero rows, ``dimension`` columns, float32."""
    return np.zeros((0, max(dimension, 0)), dtype=np.float32)


def row_count_error(source: str, got: int, expected: int) -> EmbeddingUnavailableError:
    """The error for an answer with the wrong number of vectors: they could not be matched to their texts."""
    return EmbeddingUnavailableError(
        f"{source}返回了 {got} 个向量，但请求了 {expected} 条文本；为避免向量错位，本次结果作废。"
    )


def checked_matrix(rows: Any, *, expected_rows: int, expected_dimension: int | None, source: str) -> np.ndarray:
    """Turn a provider's raw answer into a normalised float32 matrix, or explain why it is unusable.

    Checks the row count (a server that drops an input would otherwise shift every later vector onto the wrong
    text), a consistent and, if known, expected dimension (vectors of another model must never reach the index),
    and finite values. ``source`` names the provider in the Chinese error message.
    """
    try:
        matrix = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingUnavailableError(
            f"{source}返回的向量无法解析为数值矩阵（各向量长度不一致或含非数值）：{exc}"
        ) from exc
    if matrix.ndim != 2:
        raise EmbeddingUnavailableError(f"{source}返回的向量形状为 {matrix.shape}，应为（文本数, 维度）的二维矩阵。")
    if matrix.shape[0] != expected_rows:
        raise row_count_error(source, matrix.shape[0], expected_rows)
    if matrix.shape[1] == 0:
        raise EmbeddingUnavailableError(f"{source}返回了空向量（维度为 0）。")
    if expected_dimension and matrix.shape[1] != expected_dimension:
        raise EmbeddingUnavailableError(
            f"{source}返回 {matrix.shape[1]} 维向量，但应为 {expected_dimension} 维；"
            "请检查嵌入模型配置是否被更换（更换模型后需要执行 reindex）。"
        )
    if not np.all(np.isfinite(matrix)):
        raise EmbeddingUnavailableError(f"{source}返回的向量包含 NaN 或无穷大。")
    return l2_normalise(matrix)


async def resolve_dimension(embedder: Embedder) -> int:
    """Return the embedder's dimension, asking it for one probe query vector if it is not known yet.

    HTTP and host providers may only learn their dimension from a first answer; the runtime needs it before
    opening vector collections. Raises ``EmbeddingUnavailableError`` if the provider cannot answer.
    """
    if embedder.dimension > 0:
        return embedder.dimension
    probe = await embedder.embed_queries(["维度探测 dimension probe"])
    return int(probe.shape[1])
