"""SQL of the chat log and of episodes: rows, keyword indexes, windows of unprocessed messages, retraction.

Every query that returns evidence carries ``store_key IN (...)`` in its ``WHERE`` clause, so a scope never sees
another store's chat. Mutating methods take the open transaction's connection. Message text is written once; the
table's trigger rejects every later change except the retraction that clears it.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Collection, Sequence
from typing import Any

import aiosqlite

from ..logic.segmentation import segment_for_index
from ..storage.database import Database, fetch_rows, in_clause, placeholders

MESSAGE_COLUMNS = (
    "seq",
    "entry_id",
    "message_id",
    "stream_id",
    "store_key",
    "owner_uid",
    "platform",
    "chat_type",
    "direction",
    "sender_id",
    "sender_name",
    "sent_at",
    "recorded_at",
    "text",
    "retracted_at",
    "retraction",
)
EPISODE_COLUMNS = (
    "seq",
    "episode_id",
    "store_key",
    "owner_uid",
    "stream_id",
    "topic",
    "summary",
    "start_at",
    "end_at",
    "message_count",
    "model_id",
    "batch_id",
    "created_at",
)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ChatLog:
    """All SQL touching ``booku_chat_messages``, ``booku_chat_fts``, episodes and their keyword index."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -------------------------------------------------------------- messages
    async def insert_message(self, conn: aiosqlite.Connection, row: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Insert one message (and its keyword row). Returns ``(stored row, created)``; a host message id seen
        before in the same stream is not stored twice."""
        existing = await fetch_rows(
            self.db,
            conn,
            f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM booku_chat_messages WHERE stream_id = ? AND message_id = ?",
            [row["stream_id"], row["message_id"]],
        )
        if existing:
            return dict(existing[0]), False
        values = {
            **row,
            "entry_id": f"chat-{uuid.uuid4().hex[:20]}",
            "recorded_at": time.time(),
            "text_sha256": text_sha256(row["text"]),
        }
        columns = [c for c in (*MESSAGE_COLUMNS, "text_sha256") if c in values and c != "seq"]
        cur = await conn.execute(
            f"INSERT INTO booku_chat_messages ({', '.join(columns)}) VALUES ({placeholders(len(columns))})",
            [values[c] for c in columns],
        )
        seq = cur.lastrowid
        await conn.execute(
            "INSERT INTO booku_chat_fts (rowid, text) VALUES (?, ?)", [seq, segment_for_index(row["text"])]
        )
        stored = await fetch_rows(
            self.db, conn, f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM booku_chat_messages WHERE seq = ?", [seq]
        )
        return dict(stored[0]), True

    async def messages(
        self, entry_ids: Collection[str], *, store_keys: Sequence[str] | None, conn: aiosqlite.Connection | None = None
    ) -> dict[str, dict[str, Any]]:
        """Messages by entry id (retracted ones included, with empty text), limited to ``store_keys`` when given."""
        ids = list(dict.fromkeys(entry_ids))
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            clause, params = in_clause("entry_id", chunk)
            if store_keys is not None:
                store_clause, store_params = in_clause("store_key", list(store_keys))
                clause, params = f"{clause} AND {store_clause}", params + store_params
            rows = await fetch_rows(
                self.db, conn, f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM booku_chat_messages WHERE {clause}", params
            )
            found.update({row["entry_id"]: dict(row) for row in rows})
        return found

    async def message_by_host_id(
        self, stream_id: str, message_id: str, *, store_keys: Sequence[str]
    ) -> dict[str, Any] | None:
        store_clause, params = in_clause("store_key", list(store_keys))
        rows = await self.db.fetch_all(
            f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM booku_chat_messages WHERE stream_id = ? AND message_id = ? "
            f"AND {store_clause}",
            [stream_id, message_id, *params],
        )
        return dict(rows[0]) if rows else None

    @staticmethod
    def _filters(
        store_keys: Sequence[str],
        channels: Sequence[str] | None,
        since: float | None,
        until: float | None,
        alias: str = "m",
        time_column: str = "sent_at",
    ) -> tuple[str, list[Any]]:
        clause, params = in_clause(f"{alias}.store_key", list(store_keys))
        clauses = [clause]
        if channels is not None:
            channel_clause, channel_params = in_clause(f"{alias}.stream_id", list(channels))
            clauses.append(channel_clause)
            params += channel_params
        if since is not None:
            clauses.append(f"{alias}.{time_column} >= ?")
            params.append(since)
        if until is not None:
            clauses.append(f"{alias}.{time_column} <= ?")
            params.append(until)
        return " AND ".join(clauses), params

    async def keyword_messages(
        self,
        fts_query: str,
        *,
        store_keys: Sequence[str],
        channels: Sequence[str] | None,
        since: float | None,
        until: float | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """FTS5 route over live messages: ``(entry_id, -bm25)`` best first."""
        where, params = self._filters(store_keys, channels, since, until)
        rows = await self.db.fetch_all(
            f"SELECT m.entry_id, bm25(booku_chat_fts) AS rank FROM booku_chat_fts "
            f"JOIN booku_chat_messages m ON m.seq = booku_chat_fts.rowid "
            f"WHERE booku_chat_fts MATCH ? AND m.retracted_at = 0 AND {where} ORDER BY rank LIMIT ?",
            [fts_query, *params, limit],
        )
        return [(row["entry_id"], -float(row["rank"])) for row in rows]

    async def list_messages(
        self,
        *,
        store_keys: Sequence[str],
        channels: Sequence[str] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 50,
        offset: int = 0,
        include_retracted: bool = True,
    ) -> tuple[list[dict[str, Any]], int]:
        """Messages newest first (dashboard), and how many match."""
        where, params = self._filters(store_keys, channels, since, until)
        if not include_retracted:
            where += " AND m.retracted_at = 0"
        rows = await self.db.fetch_all(
            f"SELECT {', '.join('m.' + c for c in MESSAGE_COLUMNS)} FROM booku_chat_messages m WHERE {where} "
            f"ORDER BY m.sent_at DESC, m.seq DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        total = await self.db.fetch_value(f"SELECT COUNT(*) FROM booku_chat_messages m WHERE {where}", params, 0)
        return [dict(row) for row in rows], int(total)

    async def channels(self, *, store_keys: Sequence[str]) -> list[dict[str, Any]]:
        """Channels (streams) with messages in the given stores, most recent first."""
        clause, params = in_clause("store_key", list(store_keys))
        rows = await self.db.fetch_all(
            f"SELECT store_key, stream_id, platform, chat_type, COUNT(*) AS messages, MAX(sent_at) AS last_at "
            f"FROM booku_chat_messages WHERE {clause} GROUP BY store_key, stream_id ORDER BY last_at DESC",
            params,
        )
        return [dict(row) for row in rows]

    async def counts(self, *, store_keys: Sequence[str] | None = None) -> dict[str, int]:
        """Messages (live / retracted / expired), unprocessed live messages, episodes."""
        clause, params = ("1", []) if store_keys is None else in_clause("store_key", list(store_keys))
        row = await self.db.fetch_one(
            "SELECT COUNT(*) AS total, SUM(retraction = 'retracted') AS retracted, SUM(retraction = "
            "'expired') AS expired, "
            f"SUM(retracted_at = 0 AND NOT EXISTS (SELECT 1 FROM booku_episode_messages em "
            f"WHERE em.entry_id = booku_chat_messages.entry_id)) AS unprocessed "
            f"FROM booku_chat_messages WHERE {clause}",
            params,
        )
        episodes = await self.db.fetch_value(f"SELECT COUNT(*) FROM booku_episodes WHERE {clause}", params, 0)
        total = int(row["total"] or 0) if row else 0
        retracted = int(row["retracted"] or 0) if row else 0
        expired = int(row["expired"] or 0) if row else 0
        return {
            "messages": total - retracted - expired,
            "retracted": retracted,
            "expired": expired,
            "unprocessed": int(row["unprocessed"] or 0) if row else 0,
            "episodes": int(episodes),
        }

    # ---------------------------------------------------------- stage A input
    async def channels_with_unprocessed(self) -> list[dict[str, Any]]:
        """``{store_key, owner_uid, stream_id, pending}`` for every channel with live messages no episode covers."""
        rows = await self.db.fetch_all(
            "SELECT m.store_key, m.owner_uid, m.stream_id, COUNT(*) AS pending FROM booku_chat_messages m "
            "WHERE m.retracted_at = 0 AND NOT EXISTS (SELECT 1 FROM booku_episode_messages em WHERE "
            "em.entry_id = m.entry_id) "
            "GROUP BY m.store_key, m.owner_uid, m.stream_id ORDER BY MIN(m.seq)"
        )
        return [dict(row) for row in rows]

    async def unprocessed_messages(
        self, *, store_key: str, owner_uid: str, stream_id: str, limit: int
    ) -> list[dict[str, Any]]:
        """The oldest live messages of one channel that no episode covers, oldest first."""
        rows = await self.db.fetch_all(
            f"SELECT {', '.join('m.' + c for c in MESSAGE_COLUMNS)} FROM booku_chat_messages m "
            f"WHERE m.store_key = ? AND m.owner_uid = ? AND m.stream_id = ? AND m.retracted_at = 0 "
            f"AND NOT EXISTS (SELECT 1 FROM booku_episode_messages em WHERE em.entry_id = m.entry_id) "
            f"ORDER BY m.sent_at, m.seq LIMIT ?",
            [store_key, owner_uid, stream_id, limit],
        )
        return [dict(row) for row in rows]

    async def latest_sent_at(self, *, store_key: str, stream_id: str) -> float:
        """When the channel's newest message (processed or not) was sent: a window is only closed after quiet."""
        return float(
            await self.db.fetch_value(
                "SELECT MAX(sent_at) FROM booku_chat_messages WHERE store_key = ? AND stream_id = ?",
                [store_key, stream_id],
                0.0,
            )
            or 0.0
        )

    async def still_unprocessed(self, conn: aiosqlite.Connection, entry_ids: Sequence[str]) -> bool:
        """True when every id is a live message no episode covers (checked inside the committing transaction)."""
        clause, params = in_clause("m.entry_id", list(entry_ids))
        rows = await fetch_rows(
            self.db,
            conn,
            f"SELECT COUNT(*) AS n FROM booku_chat_messages m WHERE {clause} AND m.retracted_at = 0 "
            f"AND NOT EXISTS (SELECT 1 FROM booku_episode_messages em WHERE em.entry_id = m.entry_id)",
            params,
        )
        return int(rows[0]["n"]) == len(set(entry_ids))

    # -------------------------------------------------------------- episodes
    async def insert_episode(
        self, conn: aiosqlite.Connection, episode: dict[str, Any], entry_ids: Sequence[str]
    ) -> dict[str, Any]:
        columns = [c for c in EPISODE_COLUMNS if c != "seq"]
        cur = await conn.execute(
            f"INSERT INTO booku_episodes ({', '.join(columns)}) VALUES ({placeholders(len(columns))})",
            [episode[c] for c in columns],
        )
        seq = cur.lastrowid
        await conn.executemany(
            "INSERT INTO booku_episode_messages (episode_id, entry_id) VALUES (?, ?)",
            [(episode["episode_id"], entry_id) for entry_id in entry_ids],
        )
        await conn.execute(
            "INSERT INTO booku_episode_fts (rowid, topic, summary) VALUES (?, ?, ?)",
            [seq, segment_for_index(episode["topic"]), segment_for_index(episode["summary"])],
        )
        return {**episode, "seq": seq}

    async def episodes(
        self, episode_ids: Sequence[str], *, store_keys: Sequence[str] | None, conn: aiosqlite.Connection | None = None
    ) -> dict[str, dict[str, Any]]:
        """Episodes by id with their covered ``entry_ids`` (in message order)."""
        clause, params = in_clause("e.episode_id", list(dict.fromkeys(episode_ids)))
        if store_keys is not None:
            store_clause, store_params = in_clause("e.store_key", list(store_keys))
            clause, params = f"{clause} AND {store_clause}", params + store_params
        rows = await fetch_rows(
            self.db,
            conn,
            f"SELECT {', '.join('e.' + c for c in EPISODE_COLUMNS)} FROM booku_episodes e WHERE {clause}",
            params,
        )
        found = {row["episode_id"]: {**dict(row), "entry_ids": []} for row in rows}
        if found:
            link_clause, link_params = in_clause("em.episode_id", list(found))
            links = await fetch_rows(
                self.db,
                conn,
                f"SELECT em.episode_id, em.entry_id FROM booku_episode_messages em "
                f"JOIN booku_chat_messages m ON m.entry_id = em.entry_id WHERE {link_clause} "
                f"ORDER BY m.sent_at, m.seq",
                link_params,
            )
            for link in links:
                found[link["episode_id"]]["entry_ids"].append(link["entry_id"])
        return found

    async def keyword_episodes(
        self,
        fts_query: str,
        *,
        store_keys: Sequence[str],
        channels: Sequence[str] | None,
        since: float | None,
        until: float | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """FTS5 route over episodes: ``(episode_id, -bm25)``, topic weighted twice."""
        where, params = self._filters(store_keys, channels, since, until, alias="e", time_column="end_at")
        rows = await self.db.fetch_all(
            f"SELECT e.episode_id, bm25(booku_episode_fts, 2.0, 1.0) AS rank FROM booku_episode_fts "
            f"JOIN booku_episodes e ON e.seq = booku_episode_fts.rowid "
            f"WHERE booku_episode_fts MATCH ? AND {where} ORDER BY rank LIMIT ?",
            [fts_query, *params, limit],
        )
        return [(row["episode_id"], -float(row["rank"])) for row in rows]

    async def list_episodes(
        self, *, store_keys: Sequence[str], channels: Sequence[str] | None = None, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        where, params = self._filters(store_keys, channels, None, None, alias="e", time_column="end_at")
        rows = await self.db.fetch_all(
            f"SELECT e.episode_id FROM booku_episodes e WHERE {where} ORDER BY e.end_at DESC, e.seq DESC "
            f"LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        ids = [row["episode_id"] for row in rows]
        found = await self.episodes(ids, store_keys=store_keys)
        return [found[i] for i in ids if i in found]

    async def new_episodes(self, *, store_key: str, owner_uid: str, after_seq: int, limit: int) -> list[dict[str, Any]]:
        """One owner's episodes after a high-water mark, oldest first (stage B input)."""
        rows = await self.db.fetch_all(
            "SELECT episode_id FROM booku_episodes WHERE store_key = ? AND owner_uid = ? AND seq > ? ORDER "
            "BY seq LIMIT ?",
            [store_key, owner_uid, after_seq, limit],
        )
        ids = [row["episode_id"] for row in rows]
        found = await self.episodes(ids, store_keys=[store_key])
        return [found[i] for i in ids if i in found]

    async def owners_with_new_episodes(self) -> list[dict[str, Any]]:
        """``{store_key, owner_uid, newest}`` for every owner whose newest episode is past its stage B mark."""
        rows = await self.db.fetch_all(
            "SELECT e.store_key, e.owner_uid, MAX(e.seq) AS newest FROM booku_episodes e "
            "LEFT JOIN booku_dreaming_marks k ON k.store_key = e.store_key AND k.owner_uid = e.owner_uid "
            "WHERE e.seq > COALESCE(k.episode_seq, 0) GROUP BY e.store_key, e.owner_uid ORDER BY MIN(e.seq)"
        )
        return [dict(row) for row in rows]

    async def episodes_covering(self, conn: aiosqlite.Connection, entry_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Episodes that cover any of ``entry_ids`` with all the messages each covers."""
        clause, params = in_clause("entry_id", list(entry_ids))
        rows = await fetch_rows(
            self.db, conn, f"SELECT DISTINCT episode_id FROM booku_episode_messages WHERE {clause}", params
        )
        found = await self.episodes([row["episode_id"] for row in rows], store_keys=None, conn=conn)
        return list(found.values())

    async def delete_episode(self, conn: aiosqlite.Connection, episode: dict[str, Any]) -> None:
        """Remove an episode, its keyword row and its links (its messages become unprocessed again)."""
        await conn.execute("DELETE FROM booku_episode_fts WHERE rowid = ?", [episode["seq"]])
        await conn.execute("DELETE FROM booku_episodes WHERE episode_id = ?", [episode["episode_id"]])

    # ------------------------------------------------------------- retraction
    async def clear_message(
        self, conn: aiosqlite.Connection, message: dict[str, Any], *, kind: str, now: float
    ) -> None:
        """Remove a message's bytes: the text (the only update the trigger allows) and its keyword row."""
        await conn.execute(
            "UPDATE booku_chat_messages SET text = '', text_sha256 = '', retracted_at = ?, retraction = ? "
            "WHERE entry_id = ? AND retracted_at = 0",
            [now, kind, message["entry_id"]],
        )
        await conn.execute("DELETE FROM booku_chat_fts WHERE rowid = ?", [message["seq"]])

    async def expired_messages(self, *, cutoff: float, limit: int) -> list[dict[str, Any]]:
        """Live messages sent before ``cutoff`` (retention), oldest first."""
        rows = await self.db.fetch_all(
            f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM booku_chat_messages WHERE retracted_at = 0 AND sent_at < ? "
            f"ORDER BY sent_at LIMIT ?",
            [cutoff, limit],
        )
        return [dict(row) for row in rows]

    async def optimise_keyword_index(self, conn: aiosqlite.Connection) -> None:
        """Merge the FTS5 segments so deleted tokens are physically rewritten, not just marked deleted."""
        await conn.execute("INSERT INTO booku_chat_fts (booku_chat_fts) VALUES ('optimize')")
        await conn.execute("INSERT INTO booku_episode_fts (booku_episode_fts) VALUES ('optimize')")
