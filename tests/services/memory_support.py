"""Helpers shared by the memory-service tests: a store probe, test data and ways to open a data directory.

``Probe`` reads SQLite and Chroma directly so a test can check the *effect* of a call (rows, tags, revisions,
outbox, vectors per tier), not only its return value.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import EmbeddingUnavailableError
from booku_memory.services.logic.text import compose_embedding_text

MEMORY_SERVICE = "booku_memory:service:booku_memory"
STORE = "shared"
TIERS = ("live", "archive", "knowledge")
TABLES = (
    "booku_memory_records",
    "booku_memory_tags",
    "booku_memory_revisions",
    "booku_vector_outbox",
    "booku_temporary_memos",
)
ITEM_KEYS = {"id", "title", "content_snippet", "is_truncated", "metadata"}


class Probe:
    """Direct read access to SQLite and Chroma behind one runtime."""

    def __init__(self, runtime: Any) -> None:
        self.rt = runtime

    async def count(self, table: str, where: str = "1", params: Sequence[Any] = ()) -> int:
        await self.rt.settle_deferred_vectors()  # write-behind: count the outbox after the pending flush
        row = await self.rt.db.fetch_one(f"SELECT COUNT(*) FROM {table} WHERE {where}", list(params))
        return int(row[0])

    async def table_counts(self) -> dict[str, int]:
        return {table: await self.count(table) for table in TABLES}

    async def row(self, memory_id: str) -> dict[str, Any] | None:
        row = await self.rt.db.fetch_one("SELECT * FROM booku_memory_records WHERE memory_id = ?", [memory_id])
        return dict(row) if row is not None else None

    async def tags(self, memory_id: str) -> dict[str, list[str]]:
        rows = await self.rt.db.fetch_all(
            "SELECT tag_type, tag_value FROM booku_memory_tags WHERE memory_id = ? ORDER BY tag_type, position",
            [memory_id],
        )
        found: dict[str, list[str]] = {"tag": [], "core": [], "diffusion": [], "opposing": []}
        for row in rows:
            found[row["tag_type"]].append(row["tag_value"])
        return found

    async def revisions(self, memory_id: str) -> list[tuple[int, str]]:
        rows = await self.rt.db.fetch_all(
            "SELECT version, action FROM booku_memory_revisions WHERE memory_id = ? ORDER BY version", [memory_id]
        )
        return [(row["version"], row["action"]) for row in rows]

    async def tiers_of(self, memory_id: str) -> list[str]:
        """The vector partitions that currently hold a vector for this id (normally zero or one)."""
        found = []
        for tier in TIERS:
            if memory_id in await self.rt.vectors.get_embeddings(STORE, [memory_id], tiers=[tier]):
                found.append(tier)
        return found

    async def vector(self, memory_id: str) -> np.ndarray | None:
        found = await self.rt.vectors.get_embeddings(STORE, [memory_id])
        return found.get(memory_id)

    async def vector_counts(self) -> dict[str, int]:
        return await self.rt.vectors.count()

    async def pending(self) -> int:
        return await self.count("booku_vector_outbox")

    async def set_created_days_ago(self, memory_ids: Sequence[str], days: float) -> None:
        """Age records: the lifecycle looks at created_at, so moving it back is the honest way to simulate time."""
        async with self.rt.db.transaction() as conn:
            for memory_id in memory_ids:
                await conn.execute(
                    "UPDATE booku_memory_records SET created_at = created_at - ? WHERE memory_id = ?",
                    [days * 86400.0, memory_id],
                )

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        async with self.rt.db.transaction() as conn:
            await conn.execute(sql, list(params))


def expected_vector(title: str, content: str) -> np.ndarray:
    """What the deterministic embedder stores for a memory (title line + body, as the write path frames it)."""
    return DeterministicTestEmbedder().embed_sync([compose_embedding_text(title, content)])[0]


# No background maintenance loop or start-up ingest: tests call maintenance explicitly.
QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


@contextlib.asynccontextmanager
async def open_store(path: Path, *, embedder: Any = None, config: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    """Open a handle on ``path`` (the deterministic test embedder unless another is given).

    ``config`` sections are merged over ``QUIET_CONFIG``.
    """
    merged = {**QUIET_CONFIG, **(config or {})}
    async with booku_memory.open(path, merged, embedder=embedder or DeterministicTestEmbedder()) as handle:
        yield handle


TRIPLET = {"core_tags": ["生活"], "diffusion_tags": ["日常"], "opposing_tags": ["工作"]}

# Turns of a chat about unrelated everyday things, and one more that a question about mint answers.
DAILY_CHAT = [
    "用户说周末去香山爬山，早上六点出发，带了两瓶水。",
    "用户每天早上喝一杯美式咖啡，不加糖也不加奶。",
    "用户的猫叫小橘，是一只橘色的公猫，最爱吃鱼干。",
    "用户在学吉他，已经会弹三个和弦了。",
    "用户说公司楼下新开了一家面馆，牛肉面很好吃。",
    "用户打算下个月去青岛看海，已经订好了火车票。",
]
MINT_TURN = "用户上周在阳台种了一盆薄荷，每天给薄荷浇水。"

# Four memories on unrelated topics (they share only the word 用户), so neither route confuses them.
CAT = ("小橘", "用户的猫叫小橘，是一只橘色的公猫，今年三岁，最爱吃鱼干。")
HIKE = ("周末爬山", "用户喜欢周末去香山爬山，通常早上六点出发，带两瓶水。")
COFFEE = ("早晨咖啡", "用户每天早上喝一杯美式咖啡，不加糖也不加奶。")
PROJECT = ("Booku 项目", "用户正在用 Python 开发一个叫 Booku 的长期记忆插件。")

# A long memory and a copy with one more sentence: similar enough (cos ≈ 0.97, novelty ≈ 0.06 with the
# deterministic embedder) that the default write-conflict settings merge them.
CAT_LONG = (
    "用户的猫叫小橘，是一只橘色的公猫，今年三岁，喜欢吃鱼干，晚上喜欢睡在沙发上，白天经常在阳台晒太阳，很怕洗澡。"
)
CAT_LONG_PLUS = CAT_LONG + "体重五公斤。"


async def seed(svc: Any, *entries: tuple[str, str], **fields: Any) -> list[str]:
    """Create memories with ``create_memory`` (all three tag groups, as the developer guide requires); returns
    their ids."""
    ids = []
    for title, content in entries:
        result = await svc.create_memory(title=title, content=content, **{**TRIPLET, **fields})
        assert result["mode"] == "created", f"{title} 被意外合并"
        ids.append(result["id"])
    return ids


async def write_turns(svc: Any, texts: list[str]) -> list[str]:
    """Write each of ``texts`` with ``upsert_memory`` in order, as a bot stores a conversation; returns their ids."""
    return [(await svc.upsert_memory(text))["id"] for text in texts]


@dataclass
class ChatRetrieval:
    """One query over a stored conversation: the turns' ids in order, the answer and the turns' candidate rows."""

    ids: list[str]
    result: dict[str, Any]
    rows: dict[str, dict[str, Any]]

    @property
    def ranked(self) -> list[str]:
        return [item["id"] for item in self.result["results"]]

    @property
    def parts(self) -> dict[str, dict[str, float]]:
        """Each result's ``score_parts`` by id."""
        return {item["id"]: item["score_parts"] for item in self.result["results"]}


async def retrieve_over_chat(path: Path, chat: list[str], query: str, *, top_k: int | None = None) -> ChatRetrieval:
    """Store ``chat`` turn by turn in a fresh store at ``path``, then retrieve ``query`` (``top_k`` defaults to the
    whole chat) and read the turns' candidate rows."""
    async with open_store(path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await write_turns(svc, chat)
        result = await svc.retrieve_memories(query, top_k=top_k or len(chat))
        rows = await handle.runtime.records.candidates(ids, with_tags=False)
    return ChatRetrieval(ids, result, rows)


class SwitchableEmbedder:
    """Deterministic test vectors, with a switch that simulates an embedding outage (``down = True``)."""

    def __init__(self) -> None:
        self.inner = DeterministicTestEmbedder()
        self.model_id = self.inner.model_id
        self.dimension = self.inner.dimension
        self.down = False

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self._check()
        return await self.inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self._check()
        return await self.inner.embed_queries(texts)

    def _check(self) -> None:
        if self.down:
            raise EmbeddingUnavailableError("测试：嵌入服务暂时不可用")

    async def aclose(self) -> None:
        """Nothing to release."""
