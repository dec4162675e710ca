"""BookuKnowledgeService: ingest documents into the knowledge base, list, export and delete them.

A document is cut by the structure-aware chunker (``logic/chunking.py``) and stored as knowledge chunks: ordinary
records in bucket ``knowledge`` whose title (``《T》-片段i：<heading path>``) and body are both indexed and embedded,
so they take part in ``retrieve_memories(include_knowledge=True)`` and ``search_memory_entries`` of the memory
service, and never in memory-only listings.

Re-ingest is idempotent: a document is identified by (store, title, source path) and carries a hash of its
normalised text, so unchanged text writes nothing; changed text replaces the chunks in one transaction while every
version stays in the document history. Chunking, keyword extraction and file reading run in a worker thread, and
each document is one short write transaction, so a large startup ingest does not stall live traffic.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import BookuError, NotFoundError, ValidationError
from .knowledge_files import MAX_FILE_BYTES, check_file_type, is_supported, load_knowledge_bytes, read_knowledge_file
from .logic.chunking import TextChunk, chunk_text, normalise_text
from .logic.segmentation import STOPWORDS, tokenize
from .logic.tags import normalise_tags
from .scope import Scope, WriteContext
from .text_input import guarded_text_inputs

if TYPE_CHECKING:
    from .runtime import BookuRuntime

logger = logging.getLogger(__name__)

KNOWLEDGE_COLLECTION = "booku_memory__knowledge"
KNOWLEDGE_TAG = "booku_knowledge"
KNOWLEDGE_FOLDER = "default"
TITLE_MAX_CHARS = 100
SOURCE_MAX_CHARS = 64
RESULT_ITEM_LIMIT = 20
DUMP_MAX_LIMIT = 5000
KEYWORDS_PER_GROUP = 8
DIFFUSION_SOURCE_CHARS = 100
STARTUP_SOURCE = "startup_ingest"

Progress = Callable[[str], None]
FileProgress = Callable[[int, int, str], None]
CLI_SOURCE = "cli"


@dataclass(frozen=True)
class _PlannedChunk:
    """A chunk with its keyword tags, computed off the event loop; ids are assigned once the document id is known."""

    chunk: TextChunk
    core_tags: list[str]
    diffusion_tags: list[str]


def document_title_label(title: str) -> str:
    """How a document title is shown everywhere: ``《T》``."""
    return f"《{title}》"


def chunk_record_title(title: str, index: int, heading: str) -> str:
    """``《T》-片段i：<heading path>``, or ``《T》-片段i`` for text outside any heading."""
    base = f"{document_title_label(title)}-片段{index}"
    return f"{base}：{heading}" if heading else base


def chunk_memory_id(document_id: str, index: int) -> str:
    """``kb-doc-<hex>-0001`` (1-based, like the chunk index and the title)."""
    return f"kb-{document_id}-{index:04d}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _keywords(text: str) -> list[str]:
    """Meaningful tokens of ``text`` in order: stop words, single characters and pure numbers dropped."""
    return [t for t in tokenize(text) if len(t) > 1 and t not in STOPWORDS and not t.isdigit()]


def plan_chunks(title: str, text: str, *, markdown: bool, max_chars: int, overlap_chars: int) -> list[_PlannedChunk]:
    """Chunk a document and derive each chunk's tags (CPU work; run in a thread).

    Core tags: words of the document title and heading path (what the chunk is about). Diffusion tags: the most
    frequent words of the chunk's opening (its first ``DIFFUSION_SOURCE_CHARS`` characters). Only the opening is
    segmented because jieba is the dominant cost of an ingest and the whole body is segmented for the keyword
    index anyway; the tags only have to point at the topic.
    """
    planned = []
    title_words = _keywords(title)
    for chunk in chunk_text(text, max_chars=max_chars, overlap_chars=overlap_chars, markdown=markdown):
        core = normalise_tags([*_keywords(" ".join(chunk.heading_path)), *title_words])[:KEYWORDS_PER_GROUP]
        counts = Counter(_keywords(chunk.text[:DIFFUSION_SOURCE_CHARS]))
        frequent = [word for word, _ in counts.most_common() if word not in core]
        diffusion = normalise_tags(frequent)[:KEYWORDS_PER_GROUP]
        planned.append(_PlannedChunk(chunk, core or ["知识库"], diffusion or ["文档检索"]))
    return planned


@guarded_text_inputs
class BookuKnowledgeService:
    """Knowledge-base API (signature ``booku_memory:service:booku_knowledge``). Cheap view on a ``BookuRuntime``."""

    def __init__(self, runtime: BookuRuntime, scope: Scope | None = None) -> None:
        self.runtime = runtime
        self.scope = scope or runtime.default_scope

    # ----------------------------------------------------------------- ingest
    async def ingest_document(
        self, *, title: str, content: str = "", file_path: str | os.PathLike[str] | None = None, source: str = "agent"
    ) -> dict[str, Any]:
        """Ingest text (``content``) or a local file (``file_path``) as one knowledge document.

        Exactly one of ``content`` and ``file_path`` must be given. A relative ``file_path`` is looked up in the
        current directory first, then in the data directory; Windows separators work. With a file, a blank title
        falls back to the file name. Content given directly is read as Markdown (headings become chunk titles).

        Returns ``{action: "booku_knowledge_ingest", mode: created|updated|unchanged, document_id, title: "《T》",
        chunk_count, version, bucket: "knowledge", folder_id: "default", collection, items: first 20 chunk ids,
        changed_chunks, source_path, vector_pending}`` (``vector_pending`` > 0 means the embedder was unavailable and
        the vectors follow later from the outbox; keyword search finds the chunks already). Raises ``ValidationError``
        before writing anything when the input is invalid, the file is unreadable/unsupported/empty, or no chunk
        results.
        """
        if self.scope.authority == "mechanical":
            raise ValidationError("mechanical 权限不能撰写内容（入库知识库文档），只能改变状态，且必须注明原因")
        source = _clean_source(source)
        has_content = content is not None and not (isinstance(content, str) and not content.strip())
        has_file = file_path is not None and str(file_path).strip() != ""
        if has_content and has_file:
            raise ValidationError("content 与 file_path 只能二选一：直接传入文本用 content，入库本地文件用 file_path")
        if not has_content and not has_file:
            raise ValidationError("content 与 file_path 不能同时为空")
        if has_file:
            path = self._resolve_file(str(file_path))
            clean_title = _clean_title(title, fallback=path.stem)
            loaded = await asyncio.to_thread(read_knowledge_file, path)
            return await self._ingest_text(
                clean_title,
                loaded.text,
                markdown=loaded.markdown,
                source=source,
                source_path=self._source_path(loaded.path),
                context=self.scope.context,
            )
        if not isinstance(content, str):
            raise ValidationError(f"content 必须是字符串，实际为 {type(content).__name__}")
        clean_title = _clean_title(title)
        text = normalise_text(content)
        return await self._ingest_text(
            clean_title, text, markdown=True, source=source, source_path="", context=self.scope.context
        )

    async def ingest_upload(
        self, *, file_name: str, data: bytes, title: str = "", source: str = "dashboard"
    ) -> dict[str, Any]:
        """Ingest an uploaded file's bytes, read exactly as a file on disk would be (same types and encodings).

        An upload that is another copy of a document already in the store (the same title, a file of the same
        name, e.g. one the CLI ingested, or the same text) re-ingests that document: its text is replaced with a
        new version in its history, or nothing happens when the text is unchanged; it never becomes a second
        document. A blank ``title`` falls back to the file name without its suffix.

        Returns the ``ingest_document`` result (``mode`` created|updated|unchanged). Raises ``ValidationError``
        (naming ``file``) for an unsupported type, a file over 20 MB, undecodable or empty text.
        """
        if self.scope.authority == "mechanical":
            raise ValidationError("mechanical 权限不能撰写内容（入库知识库文档），只能改变状态，且必须注明原因")
        source = _clean_source(source)
        name = Path(str(file_name or "").replace("\\", "/")).name
        if not name:
            raise ValidationError("file 缺少文件名：请选择一个文件上传")
        check_file_type(name, "file")
        if len(data) > MAX_FILE_BYTES:
            raise ValidationError(f"file 文件过大（{len(data)} 字节），单个文件最多 {MAX_FILE_BYTES} 字节：{name}")
        loaded = await asyncio.to_thread(load_knowledge_bytes, data, Path(name), "file")
        clean_title = _clean_title(title, fallback=Path(name).stem)
        same = await self.runtime.documents.find_same(
            store_key=self.scope.writable_store_key,
            title=clean_title,
            file_name=name,
            content_hash=content_hash(loaded.text),
        )
        return await self._ingest_text(
            same["title"] if same else clean_title,
            loaded.text,
            markdown=loaded.markdown,
            source=source,
            source_path=same["source_path"] if same else "",
            context=self.scope.context,
        )

    async def _ingest_text(
        self, title: str, text: str, *, markdown: bool, source: str, source_path: str, context: WriteContext
    ) -> dict[str, Any]:
        if not text:
            raise ValidationError("content 与 file_path 不能同时为空：文档没有可入库的文本")
        store_key = self.scope.writable_store_key
        digest = content_hash(text)
        existing = await self.runtime.documents.find(store_key=store_key, title=title, source_path=source_path)
        if existing is not None and existing["content_hash"] == digest:
            return self._ingest_result("unchanged", existing, [])
        chunking = self.runtime.config.chunking
        planned = await asyncio.to_thread(
            plan_chunks,
            title,
            text,
            markdown=markdown,
            max_chars=chunking.max_chunk_chars,
            overlap_chars=chunking.overlap_chars,
        )
        if not planned:
            raise ValidationError("文档分块失败，文本内容为空")
        document = {
            "owner_uid": self.scope.owner_uid,
            "store_key": store_key,
            "title": title,
            "source": source,
            "source_path": source_path,
            "content": text,
            "content_hash": digest,
        }
        documents = self.runtime.documents
        async with self.runtime.db.transaction() as conn:
            # Re-check inside the write transaction: a concurrent ingest of the same document may have won.
            current = await documents.find(store_key=store_key, title=title, source_path=source_path, conn=conn)
            if current is not None and current["content_hash"] == digest:
                mode, touched = "unchanged", []
            elif current is not None:
                document_id = current["document_id"]
                chunks = self._chunk_records(document_id, title, source, planned)
                _, touched = await documents.replace(conn, document_id, document, chunks, actor=context)
                mode = "updated"
            else:
                document_id = f"doc-{uuid.uuid4().hex}"
                chunks = self._chunk_records(document_id, title, source, planned)
                touched = await documents.create(conn, {**document, "document_id": document_id}, chunks, actor=context)
                mode = "created"
            stored = await documents.find(store_key=store_key, title=title, source_path=source_path, conn=conn)
        report = await self.runtime.sync_vectors() if touched else None
        if touched:
            await self.runtime.notify_changed("knowledge_changed", touched)
        return self._ingest_result(mode, stored, touched, vector_pending=getattr(report, "pending", 0))

    def _chunk_records(
        self, document_id: str, title: str, source: str, planned: list[_PlannedChunk]
    ) -> list[dict[str, Any]]:
        records = []
        for index, item in enumerate(planned, start=1):
            records.append(
                {
                    "memory_id": chunk_memory_id(document_id, index),
                    "owner_uid": self.scope.owner_uid,
                    "store_key": self.scope.writable_store_key,
                    "title": chunk_record_title(title, index, item.chunk.heading_title),
                    "content": item.chunk.text,
                    "folder_id": KNOWLEDGE_FOLDER,
                    "bucket": "knowledge",
                    "source": source,
                    "memory_type": "knowledge",
                    "status": "active",
                    "novelty_energy": 1.0,
                    "document_id": document_id,
                    "chunk_index": index,
                    "tags": list(dict.fromkeys([KNOWLEDGE_TAG, title])),
                    "core_tags": item.core_tags,
                    "diffusion_tags": item.diffusion_tags,
                    "opposing_tags": [],
                    "extra": {"document_title": title, "heading_path": list(item.chunk.heading_path)},
                }
            )
        return records

    @staticmethod
    def _ingest_result(
        mode: str, document: dict[str, Any], touched: list[str], *, vector_pending: int = 0
    ) -> dict[str, Any]:
        count = int(document["chunk_count"])
        return {
            "action": "booku_knowledge_ingest",
            "mode": mode,
            "document_id": document["document_id"],
            "title": document_title_label(document["title"]),
            "chunk_count": count,
            "version": int(document["version"]),
            "bucket": "knowledge",
            "folder_id": KNOWLEDGE_FOLDER,
            "collection": KNOWLEDGE_COLLECTION,
            "items": [chunk_memory_id(document["document_id"], i) for i in range(1, min(count, RESULT_ITEM_LIMIT) + 1)],
            "changed_chunks": len(touched),
            "source_path": document["source_path"],
            "vector_pending": int(vector_pending),
        }

    def _resolve_file(self, file_path: str) -> Path:
        """Absolute paths as given; relative ones against the current directory, then the data directory."""
        raw = file_path.strip()
        candidate = Path(raw.replace("\\", "/")).expanduser()
        if candidate.is_absolute():
            return candidate
        in_cwd = Path.cwd() / candidate
        if in_cwd.exists():
            return in_cwd
        return self.runtime.resolve_path(raw)

    def _source_path(self, path: Path) -> str:
        """The stored identity of a file: relative to the data directory when inside it (survives moving the
        data directory), else absolute; always with ``/`` separators."""
        resolved = path.resolve()
        try:
            return resolved.relative_to(self.runtime.data_dir).as_posix()
        except ValueError:
            return resolved.as_posix()

    # ----------------------------------------------------------------- delete
    async def delete_document(self, *, document_id: str) -> dict[str, Any]:
        """Remove a document and all its chunks from SQLite, the keyword index and the vector index.

        The text stays in the document history. Returns ``{action: "booku_knowledge_delete", document_id,
        title: "《T》", deleted_chunks}``; ``NotFoundError`` for an unknown id.
        """
        document = await self._visible_document(document_id)
        if document["store_key"] != self.scope.writable_store_key:
            raise ValidationError(f"document_id {document_id} 属于只读的知识库，当前会话不能删除它")
        async with self.runtime.db.transaction() as conn:
            removed = await self.runtime.documents.delete(conn, document_id, actor=self.scope.context)
        await self.runtime.sync_vectors()
        await self.runtime.notify_changed("knowledge_changed", [])
        return {
            "action": "booku_knowledge_delete",
            "document_id": document_id,
            "title": document_title_label(document["title"]),
            "deleted_chunks": removed,
        }

    async def _visible_document(self, document_id: Any, *, with_content: bool = False) -> dict[str, Any]:
        if not isinstance(document_id, str) or not document_id.strip():
            raise ValidationError("document_id 必须是非空字符串，形如 doc-<32 位十六进制>")
        document = await self.runtime.documents.get(
            document_id.strip(), store_keys=list(self.scope.readable_store_keys), with_content=with_content
        )
        if document is None:
            raise NotFoundError(f"知识库文档不存在：{document_id}")
        return document

    # ------------------------------------------------------------------ reads
    async def export_document_titles(self) -> list[str]:
        """Distinct document titles as ``["《A》", "《B》"]``, in order of first ingest."""
        titles = await self.runtime.documents.titles(store_keys=list(self.scope.readable_store_keys))
        return [document_title_label(title) for title in titles]

    async def remember_titles_json(self) -> str:
        """The document titles as a JSON array string for prompts, e.g. ``'["《文档A》", "《文档B》"]'``."""
        return json.dumps(await self.export_document_titles(), ensure_ascii=False)

    async def dump_documents(self, *, limit: int = 100) -> dict[str, Any]:
        """The most recently updated knowledge chunks with full text (``limit`` counts chunks, 1–5000).

        Returns ``{action: "booku_knowledge_dump", total, items: [{id, title, content, updated_at, tags}]}``.
        """
        limit = _checked_limit(limit, "limit", DUMP_MAX_LIMIT)
        store_keys = list(self.scope.readable_store_keys)
        chunks = await self.runtime.documents.recent_chunks(store_keys=store_keys, limit=limit)
        items = [
            {
                "id": r["memory_id"],
                "title": r["title"],
                "content": r["content"],
                "updated_at": r["updated_at"],
                "tags": r["tags"],
            }
            for r in chunks
        ]
        return {"action": "booku_knowledge_dump", "total": len(items), "items": items}

    async def list_documents(self, *, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        """Documents for the dashboard, most recently changed first.

        Returns ``{action: "booku_knowledge_list", total, items: [{document_id, title: "《T》", raw_title, source,
        source_path, chunk_count, char_count, version, content_hash, created_at, updated_at}]}``.
        """
        limit = _checked_limit(limit, "limit", DUMP_MAX_LIMIT)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError(f"offset 必须是不小于 0 的整数，实际为 {offset!r}")
        store_keys = list(self.scope.readable_store_keys)
        rows = await self.runtime.documents.list_documents(store_keys=store_keys, limit=limit, offset=offset)
        return {
            "action": "booku_knowledge_list",
            "total": await self.runtime.documents.count(store_keys=store_keys),
            "items": [_document_item(row) for row in rows],
        }

    async def get_document(self, *, document_id: str) -> dict[str, Any]:
        """One document with its chunks in order and its version history.

        Returns ``{action: "booku_knowledge_document", ...list item fields, chunks: [{id, index, title,
        heading_path, content}], history: [{version, action, title, content_hash, char_count, created_at}]}``.
        """
        document = await self._visible_document(document_id)
        chunks = await self.runtime.documents.chunks(document["document_id"])
        return {
            "action": "booku_knowledge_document",
            **_document_item(document),
            "chunks": [
                {
                    "id": r["memory_id"],
                    "index": r["chunk_index"],
                    "title": r["title"],
                    "heading_path": list(r["extra"].get("heading_path", [])),
                    "content": r["content"],
                }
                for r in chunks
            ],
            "history": await self.runtime.documents.history(document["document_id"]),
        }

    async def get_document_revision(self, *, document_id: str, version: int) -> dict[str, Any]:
        """The full text of one stored version (current or old) of a visible document.

        Returns ``{action: "booku_knowledge_revision", document_id, version, content}``.
        """
        document = await self._visible_document(document_id)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValidationError(f"version 必须是不小于 1 的整数，实际为 {version!r}")
        text = await self.runtime.documents.revision_content(document["document_id"], version)
        if text is None:
            raise NotFoundError(f"文档 {document_id} 没有版本 {version}")
        return {
            "action": "booku_knowledge_revision",
            "document_id": document["document_id"],
            "version": version,
            "content": text,
        }

    # --------------------------------------------------------- startup ingest
    def schedule_startup_ingest(self, *, progress: Progress | None = None) -> asyncio.Task | None:
        """Start ``ingest_folders`` as a runtime-owned background task (None when startup ingest is disabled).

        Returns at once, so the host's start-up never waits for the ingest; the task is cancelled on close.
        """
        if not self.runtime.config.startup_ingest.enabled:
            return None
        return self.runtime.spawn(self._background_ingest(progress), name="booku-startup-ingest")

    async def _background_ingest(self, progress: Progress | None) -> dict[str, Any] | None:
        """``ingest_folders`` for a task nobody awaits: an unexpected error is logged, never left unretrieved."""
        try:
            return await self.ingest_folders(progress=progress)
        except Exception:
            logger.exception("知识库启动入库意外中止")
            return None

    async def ingest_folders(self, *, progress: Progress | None = None) -> dict[str, Any]:
        """Ingest every supported file under the configured ``startup_ingest.paths``.

        Paths may use POSIX or Windows separators; relative ones resolve against the data directory. Folders are
        walked recursively when ``startup_ingest.recursive``; hidden files and folders are skipped. A file whose
        text is unchanged since its last ingest is skipped by content hash; a changed file updates its document.
        Each file is one transaction, and a failing file never stops the others. Progress lines go to the log and
        to ``progress`` when given.

        Returns ``{action: "booku_knowledge_startup_ingest", enabled, total_files, ingested, updated, skipped,
        failed, ignored, failures: [{path, reason}], skipped_reasons: [{path, reason}], elapsed_seconds}``.
        """
        config = self.runtime.config.startup_ingest
        summary = _ingest_summary("booku_knowledge_startup_ingest", enabled=bool(config.enabled))
        if not config.enabled:
            return summary

        def report(line: str) -> None:
            logger.info(line)
            if progress is not None:
                progress(line)

        files = await asyncio.to_thread(self._collect_files, config, summary)
        report(f"知识库启动入库：发现 {len(files)} 个文件")

        def file_done(number: int, path: Path, line: str) -> None:
            report(f"[{number}/{len(files)}] {path}：{line}")

        await self._ingest_files(files, summary, file_done)
        report(
            f"知识库启动入库完成：新建 {summary['ingested']}，更新 {summary['updated']}，跳过 {summary['skipped']}，"
            f"失败 {summary['failed']}，忽略不支持的文件 {summary['ignored']}，用时 {summary['elapsed_seconds']} 秒"
        )
        for failure in summary["failures"]:
            report(f"  失败：{failure['path']}：{failure['reason']}")
        return summary

    async def ingest_path(
        self, path: str | os.PathLike[str], *, progress: FileProgress | None = None
    ) -> dict[str, Any]:
        """Ingest one file, or every supported file under a folder (recursively, hidden entries skipped).

        A file keeps the document it was first ingested as, as at start-up; unchanged text is skipped. A relative
        ``path`` resolves against the current directory first, then the data directory; a path found in neither
        raises ``ValidationError`` naming the path as given. ``progress(done, total, path)`` is called after each
        file. Returns ``{action: "booku_knowledge_ingest_path", path, total_files, ingested, updated, skipped,
        failed, ignored, failures: [{path, reason}], skipped_reasons, elapsed_seconds}`` with failure paths
        relative to the folder given.
        """
        typed = str(path).strip()
        if not typed:
            raise ValidationError("路径不能为空：请给出要入库的文件或文件夹")
        root = self._resolve_file(typed)
        if not root.exists():
            raise ValidationError(
                f"找不到 {typed}：当前目录 {Path.cwd()} 与数据目录 {self.runtime.data_dir} 下都没有这个文件或文件夹"
            )
        summary = _ingest_summary("booku_knowledge_ingest_path", path=typed)
        files = await asyncio.to_thread(_files_under, root, True, summary)
        shown = {
            file: (Path(typed) / file.relative_to(root)).as_posix() if root.is_dir() else typed for file, _ in files
        }

        def file_done(number: int, file: Path, line: str) -> None:
            if progress is not None:
                progress(number, len(files), shown[file])

        await self._ingest_files(files, summary, file_done, source=CLI_SOURCE, shown=shown)
        return summary

    async def _ingest_files(
        self,
        files: list[tuple[Path, str]],
        summary: dict[str, Any],
        file_done: Callable[[int, Path, str], None],
        *,
        source: str = STARTUP_SOURCE,
        shown: dict[Path, str] | None = None,
    ) -> None:
        """Ingest ``files`` one transaction each, counting outcomes into ``summary``; one failure never stops the
        rest. ``file_done(number, path, line)`` hears each file's outcome as a Chinese line."""
        started = time.perf_counter()
        summary["total_files"] = len(files)
        if files:
            await asyncio.to_thread(tokenize, "预热分词词典")
        for number, (path, title) in enumerate(files, start=1):
            label = (shown or {}).get(path, str(path))
            try:
                outcome = await self._ingest_file(path, title, source=source)
            except BookuError as exc:
                summary["failed"] += 1
                summary["failures"].append({"path": label, "reason": str(exc)})
                file_done(number, path, f"失败，{exc}")
                continue
            except Exception as exc:  # one broken file must not stop the rest of a folder ingest
                logger.exception("知识库入库出错：%s", path)
                summary["failed"] += 1
                summary["failures"].append({"path": label, "reason": f"{type(exc).__name__}: {exc}"})
                file_done(number, path, f"失败，{type(exc).__name__}: {exc}")
                continue
            if outcome["mode"] == "created":
                summary["ingested"] += 1
                file_done(number, path, f"已入库 {outcome['title']}（{outcome['chunk_count']} 个片段）")
            elif outcome["mode"] == "updated":
                summary["updated"] += 1
                file_done(number, path, f"已更新 {outcome['title']}（{outcome['chunk_count']} 个片段）")
            else:
                summary["skipped"] += 1
                file_done(number, path, "内容未变化，跳过")
        summary["elapsed_seconds"] = round(time.perf_counter() - started, 3)

    def _collect_files(self, config: Any, summary: dict[str, Any]) -> list[tuple[Path, str]]:
        """(file, title) pairs in a stable order, each file once; missing roots are counted as configured."""
        found: dict[str, tuple[Path, str]] = {}
        for entry in config.paths:
            root = self.runtime.resolve_path(str(entry))
            if not root.exists():
                reason = f"配置的路径不存在：{root}"
                if config.skip_missing_paths:
                    summary["skipped"] += 1
                    summary["skipped_reasons"].append({"path": str(root), "reason": reason})
                else:
                    summary["failed"] += 1
                    summary["failures"].append({"path": str(root), "reason": reason})
                continue
            for path, title in _files_under(root, config.recursive, summary):
                found.setdefault(os.path.normcase(str(path.resolve())), (path, title))
        return list(found.values())

    async def _ingest_file(self, path: Path, title: str, *, source: str = STARTUP_SOURCE) -> dict[str, Any]:
        """A file keeps the document it was first ingested as (even under another title); unchanged → skipped.

        Writes carry the ``source_learning`` authority: the text comes from a file, not from a person or the agent.
        """
        loaded = await asyncio.to_thread(read_knowledge_file, path)
        source_path = self._source_path(path)
        previous = await self.runtime.documents.find_by_source(
            store_key=self.scope.writable_store_key, source_path=source_path
        )
        if previous is not None:
            title = previous["title"]
        cause = "启动入库" if source == STARTUP_SOURCE else "命令行入库"
        context = WriteContext(authority="source_learning", actor=source, cause=f"{cause}：{source_path}")
        return await self._ingest_text(
            title, loaded.text, markdown=loaded.markdown, source=source, source_path=source_path, context=context
        )


# ------------------------------------------------------------------------------------------- helpers
def _ingest_summary(action: str, **extra: Any) -> dict[str, Any]:
    """The counters every folder ingest reports (see ``ingest_folders`` / ``ingest_path``)."""
    return {
        "action": action,
        **extra,
        "total_files": 0,
        "ingested": 0,
        "updated": 0,
        "skipped": 0,
        "failed": 0,
        "ignored": 0,
        "failures": [],
        "skipped_reasons": [],
        "elapsed_seconds": 0.0,
    }


def _files_under(root: Path, recursive: bool, summary: dict[str, Any]) -> list[tuple[Path, str]]:
    """(file, title) pairs under ``root`` (or ``root`` itself when it is a file) in a stable order.

    Hidden files and folders are skipped; unsupported files are counted in ``summary["ignored"]``. The title is
    the path below ``root`` without its suffix, so two ``README.md`` in different folders stay two documents.
    """
    if root.is_file():
        candidates = [(root, root.parent)]
    else:
        walker = root.rglob("*") if recursive else root.glob("*")
        candidates = [(path, root) for path in sorted(walker)]
    files = []
    for path, base in candidates:
        relative = path.relative_to(base)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        if not is_supported(path):
            summary["ignored"] += 1
            continue
        files.append((path, _clean_title("", fallback=relative.with_suffix("").as_posix())))
    return files


def _clean_title(title: Any, *, fallback: str = "") -> str:
    """Whitespace collapsed; blank → ``fallback`` (cut to 100 chars); otherwise at most 100 characters."""
    if title is not None and not isinstance(title, str):
        raise ValidationError(f"title 必须是字符串，实际为 {type(title).__name__}")
    clean = " ".join((title or "").split())
    if not clean:
        clean = " ".join(fallback.split())[:TITLE_MAX_CHARS]
        if not clean:
            raise ValidationError("title 不能为空：请给文档起一个标题")
    if len(clean) > TITLE_MAX_CHARS:
        raise ValidationError(f"title 最多 {TITLE_MAX_CHARS} 个字符，当前为 {len(clean)} 个字符")
    return clean


def _clean_source(source: Any) -> str:
    if source is None:
        return "agent"
    if not isinstance(source, str):
        raise ValidationError(f"source 必须是字符串，实际为 {type(source).__name__}")
    clean = source.strip() or "agent"
    if len(clean) > SOURCE_MAX_CHARS:
        raise ValidationError(f"source 最多 {SOURCE_MAX_CHARS} 个字符")
    return clean


def _checked_limit(value: Any, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValidationError(f"{name} 必须是 1 到 {maximum} 之间的整数，实际为 {value!r}")
    return value


def _document_item(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "document_id": row["document_id"],
        "title": document_title_label(row["title"]),
        "raw_title": row["title"],
        "source": row["source"],
        "source_path": row["source_path"],
        "chunk_count": int(row["chunk_count"]),
        "char_count": int(row["char_count"]),
        "version": int(row["version"]),
        "content_hash": row["content_hash"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
