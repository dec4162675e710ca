"""Knowledge documents: one row per document in ``booku_knowledge_documents``, chunks in ``booku_memory_records``.

A document is identified by (store_key, title, source_path); its ``content_hash`` makes re-ingest of unchanged
text a no-op. Every version of the text is kept in ``booku_knowledge_document_revisions`` (create, each update,
and the final delete), so the history survives updates and deletion.

Chunks are ordinary records (bucket ``knowledge``) with the id ``kb-<document_id>-<NNNN>``. On an update, chunk
*i* of the new text rewrites the row of chunk *i* in place (a new record revision, and a vector refresh only when
its text changed), new positions are inserted, and positions the shorter text no longer has are soft-deleted,
which drops their vector and keyword hits. Soft-deleting rather than removing keeps each id's revision numbering
continuous, so a later, longer version can bring the same position back without colliding with its history.
Deleting the document removes every chunk row for good. All of it runs inside the caller's transaction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import aiosqlite

from ..errors import NotFoundError
from ..scope import WriteContext
from .database import Database, placeholders
from .record_columns import TAG_GROUPS
from .records import RecordRepository
from .rows import RecordRow

DOCUMENT_COLUMNS = (
    "document_id, owner_uid, store_key, title, source, source_path, content_hash, chunk_count, version, "
    "created_at, updated_at, length(content) AS char_count"
)
# What decides whether a stored chunk row already equals the freshly computed chunk.
_CHUNK_COMPARED = ("title", "content", "source", "owner_uid", "chunk_index", "extra", *TAG_GROUPS.values())


class DocumentRepository:
    """All SQL touching ``booku_knowledge_documents`` and the chunk rows of a document."""

    def __init__(self, db: Database, records: RecordRepository) -> None:
        self.db = db
        self.records = records

    # ------------------------------------------------------------------ reads
    async def _rows(self, conn: aiosqlite.Connection | None, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        if conn is None:
            return [dict(row) for row in await self.db.fetch_all(sql, params)]
        async with conn.execute(sql, params) as cur:
            return [dict(row) for row in await cur.fetchall()]

    async def find(
        self, *, store_key: str, title: str, source_path: str, conn: aiosqlite.Connection | None = None
    ) -> dict[str, Any] | None:
        """The document with this identity, or None. Returns the row without its content."""
        rows = await self._rows(
            conn,
            f"SELECT {DOCUMENT_COLUMNS} FROM booku_knowledge_documents "
            f"WHERE store_key = ? AND title = ? AND source_path = ?",
            [store_key, title, source_path],
        )
        return rows[0] if rows else None

    async def get(
        self,
        document_id: str,
        *,
        store_keys: Sequence[str] | None = None,
        with_content: bool = False,
        conn: aiosqlite.Connection | None = None,
    ) -> dict[str, Any] | None:
        """One document (optionally with its full text), limited to ``store_keys`` when given."""
        columns = DOCUMENT_COLUMNS + (", content" if with_content else "")
        sql = f"SELECT {columns} FROM booku_knowledge_documents WHERE document_id = ?"
        params: list[Any] = [document_id]
        if store_keys is not None:
            sql += f" AND store_key IN ({placeholders(len(store_keys))})" if store_keys else " AND 0"
            params.extend(store_keys)
        rows = await self._rows(conn, sql, params)
        return rows[0] if rows else None

    async def list_documents(
        self, *, store_keys: Sequence[str], limit: int = 100, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Documents visible in ``store_keys``, most recently changed first (rows without content)."""
        if not store_keys:
            return []
        return await self._rows(
            None,
            f"SELECT {DOCUMENT_COLUMNS} FROM booku_knowledge_documents "
            f"WHERE store_key IN ({placeholders(len(store_keys))}) "
            f"ORDER BY updated_at DESC, document_id LIMIT ? OFFSET ?",
            [*store_keys, limit, offset],
        )

    async def count(self, *, store_keys: Sequence[str]) -> int:
        if not store_keys:
            return 0
        return int(
            await self.db.fetch_value(
                f"SELECT COUNT(*) FROM booku_knowledge_documents WHERE store_key IN ({placeholders(len(store_keys))})",
                list(store_keys),
                0,
            )
        )

    async def titles(self, *, store_keys: Sequence[str], limit: int = 5000) -> list[str]:
        """Distinct document titles in order of first ingest."""
        if not store_keys:
            return []
        rows = await self.db.fetch_all(
            f"SELECT title, MIN(created_at) AS first FROM booku_knowledge_documents "
            f"WHERE store_key IN ({placeholders(len(store_keys))}) GROUP BY title ORDER BY first, title LIMIT ?",
            [*store_keys, limit],
        )
        return [row["title"] for row in rows]

    async def find_by_source(self, *, store_key: str, source_path: str) -> dict[str, Any] | None:
        """The oldest document ingested from this file in a store, whatever its title (startup ingest reuses it)."""
        if not source_path:
            return None
        rows = await self._rows(
            None,
            f"SELECT {DOCUMENT_COLUMNS} FROM booku_knowledge_documents WHERE store_key = ? AND source_path = ? "
            f"ORDER BY created_at, document_id LIMIT 1",
            [store_key, source_path],
        )
        return rows[0] if rows else None

    async def find_same(
        self, *, store_key: str, title: str, file_name: str, content_hash: str
    ) -> dict[str, Any] | None:
        """The document an upload is another copy of: the same title, else a file of the same name, else the same
        text (content hash); the oldest such document, or None."""
        name_pattern = "%/" + file_name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        same_file = "(source_path = ? OR source_path LIKE ? ESCAPE '\\')"
        rows = await self._rows(
            None,
            f"SELECT {DOCUMENT_COLUMNS} FROM booku_knowledge_documents "
            f"WHERE store_key = ? AND (title = ? OR {same_file} OR content_hash = ?) "
            f"ORDER BY CASE WHEN title = ? THEN 0 WHEN {same_file} THEN 1 ELSE 2 END, created_at, document_id "
            f"LIMIT 1",
            [store_key, title, file_name, name_pattern, content_hash, title, file_name, name_pattern],
        )
        return rows[0] if rows else None

    async def chunks(self, document_id: str) -> list[RecordRow]:
        """The live chunk records of a document (with tags), in document order."""
        rows = await self.db.fetch_all(
            "SELECT memory_id FROM booku_memory_records WHERE document_id = ? AND bucket = 'knowledge' "
            "AND is_deleted = 0 ORDER BY chunk_index",
            [document_id],
        )
        ids = [row["memory_id"] for row in rows]
        found = await self.records.get_many(ids)
        return [found[memory_id] for memory_id in ids if memory_id in found]

    async def recent_chunks(self, *, store_keys: Sequence[str], limit: int) -> list[RecordRow]:
        """Live knowledge chunks, most recently updated first (with tags)."""
        if not store_keys:
            return []
        rows = await self.db.fetch_all(
            f"SELECT memory_id FROM booku_memory_records WHERE bucket = 'knowledge' AND is_deleted = 0 "
            f"AND store_key IN ({placeholders(len(store_keys))}) ORDER BY updated_at DESC, rid DESC LIMIT ?",
            [*store_keys, limit],
        )
        ids = [row["memory_id"] for row in rows]
        found = await self.records.get_many(ids)
        return [found[memory_id] for memory_id in ids if memory_id in found]

    async def history(self, document_id: str) -> list[dict[str, Any]]:
        """Every stored version of a document, oldest first: version, action, title, content_hash, created_at."""
        rows = await self.db.fetch_all(
            "SELECT version, action, title, content_hash, length(content) AS char_count, created_at "
            "FROM booku_knowledge_document_revisions WHERE document_id = ? ORDER BY version, revision_id",
            [document_id],
        )
        return [dict(row) for row in rows]

    async def revision_content(self, document_id: str, version: int) -> str | None:
        """The full text of one stored version, or None."""
        return await self.db.fetch_value(
            "SELECT content FROM booku_knowledge_document_revisions WHERE document_id = ? AND version = ? "
            "ORDER BY revision_id DESC LIMIT 1",
            [document_id, version],
        )

    # ----------------------------------------------------------------- writes
    async def create(
        self,
        conn: aiosqlite.Connection,
        document: dict[str, Any],
        chunks: Sequence[dict[str, Any]],
        *,
        actor: str | WriteContext,
    ) -> list[str]:
        """Insert a new document, its first revision and its chunk records. Returns the changed chunk ids."""
        now = time.time()
        await conn.execute(
            "INSERT INTO booku_knowledge_documents (document_id, owner_uid, store_key, title, source, source_path, "
            "content, content_hash, chunk_count, version, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            [
                document["document_id"],
                document["owner_uid"],
                document["store_key"],
                document["title"],
                document["source"],
                document["source_path"],
                document["content"],
                document["content_hash"],
                len(chunks),
                now,
                now,
            ],
        )
        await self._write_revision(conn, document["document_id"], 1, "create", document, now)
        return await self._write_chunks(conn, document["document_id"], chunks, actor=actor)

    async def replace(
        self,
        conn: aiosqlite.Connection,
        document_id: str,
        document: dict[str, Any],
        chunks: Sequence[dict[str, Any]],
        *,
        actor: str | WriteContext,
    ) -> tuple[int, list[str]]:
        """Store a new version of an existing document and swap its chunks. Returns (new version, changed ids)."""
        now = time.time()
        async with conn.execute(
            "SELECT version FROM booku_knowledge_documents WHERE document_id = ?", [document_id]
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            raise NotFoundError(f"文档 {document_id} 不存在")
        version = int(row[0]) + 1
        await conn.execute(
            "UPDATE booku_knowledge_documents SET owner_uid = ?, source = ?, content = ?, content_hash = ?, "
            "chunk_count = ?, version = ?, updated_at = ? WHERE document_id = ?",
            [
                document["owner_uid"],
                document["source"],
                document["content"],
                document["content_hash"],
                len(chunks),
                version,
                now,
                document_id,
            ],
        )
        await self._write_revision(conn, document_id, version, "update", document, now)
        return version, await self._write_chunks(conn, document_id, chunks, actor=actor)

    async def delete(self, conn: aiosqlite.Connection, document_id: str, *, actor: str | WriteContext) -> int:
        """Remove a document and all its chunk rows; the last text stays in the revision table.

        Returns the number of live chunks that were removed.
        """
        async with conn.execute(
            "SELECT title, content, content_hash, version FROM booku_knowledge_documents WHERE document_id = ?",
            [document_id],
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return 0
        await self._write_revision(conn, document_id, int(row["version"]) + 1, "delete", dict(row), time.time())
        async with conn.execute(
            "SELECT memory_id, is_deleted FROM booku_memory_records WHERE document_id = ?", [document_id]
        ) as cur:
            chunk_rows = list(await cur.fetchall())
        await self.records.hard_delete(conn, [r["memory_id"] for r in chunk_rows], actor=actor)
        await conn.execute("DELETE FROM booku_knowledge_documents WHERE document_id = ?", [document_id])
        return sum(1 for r in chunk_rows if not r["is_deleted"])

    async def _write_revision(
        self,
        conn: aiosqlite.Connection,
        document_id: str,
        version: int,
        action: str,
        document: dict[str, Any],
        now: float,
    ) -> None:
        await conn.execute(
            "INSERT INTO booku_knowledge_document_revisions (document_id, version, action, title, content, "
            "content_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [document_id, version, action, document["title"], document["content"], document["content_hash"], now],
        )

    async def _write_chunks(
        self,
        conn: aiosqlite.Connection,
        document_id: str,
        chunks: Sequence[dict[str, Any]],
        *,
        actor: str | WriteContext,
    ) -> list[str]:
        """Make the document's live chunk rows equal ``chunks`` (see the module docstring). Returns touched ids."""
        async with conn.execute(
            "SELECT memory_id FROM booku_memory_records WHERE document_id = ?", [document_id]
        ) as cur:
            existing_ids = [row[0] for row in await cur.fetchall()]
        existing = await self.records.get_many(existing_ids, include_deleted=True, conn=conn)
        touched: list[str] = []
        wanted = set()
        for chunk in chunks:
            memory_id = chunk["memory_id"]
            wanted.add(memory_id)
            current = existing.get(memory_id)
            if current is None:
                await self.records.insert(conn, chunk, action="knowledge_ingest", actor=actor)
                touched.append(memory_id)
            elif current["is_deleted"] or any(current.get(key) != chunk.get(key) for key in _CHUNK_COMPARED):
                changes = {key: chunk[key] for key in chunk if key not in ("memory_id", "created_at")}
                changes.update(is_deleted=False, deleted_at=0.0)
                await self.records.update(conn, memory_id, changes, action="knowledge_update", actor=actor)
                touched.append(memory_id)
        now = time.time()
        for memory_id, current in existing.items():
            if memory_id not in wanted and not current["is_deleted"]:
                await self.records.update(
                    conn, memory_id, {"is_deleted": True, "deleted_at": now}, action="knowledge_remove", actor=actor
                )
                touched.append(memory_id)
        return touched
