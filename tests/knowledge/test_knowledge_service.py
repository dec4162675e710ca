"""BookuKnowledgeService end to end on a real store (SQLite + embedded Chroma, deterministic test embedder)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import NotFoundError, ValidationError
from booku_memory.services.logic.segmentation import build_fts_query
from booku_memory.services.scope import Scope
from booku_memory.services.storage.record_filter import RecordFilter

GUIDE_MD = """# Booku 部署指南

本文说明如何部署 Booku Memory。

## 安装

使用 pip 安装：先创建虚拟环境，再执行安装命令。安装完成后运行自检。

## 配置

配置文件是 TOML 格式。端口默认是 8765，可以在 dashboard 小节修改。

## Troubleshooting

If the dashboard does not start, check whether port 8765 is already in use.
"""


@pytest.fixture
def knowledge(memory):
    return memory.get_service(booku_memory.KNOWLEDGE_SERVICE)


async def knowledge_vector_ids(memory, ids: list[str]) -> set[str]:
    return set(await memory.runtime.vectors.get_embeddings("shared", ids, tiers=("knowledge",)))


async def keyword_hits(memory, query: str) -> list[str]:
    flt = RecordFilter(store_keys=["shared"], buckets=("knowledge",))
    return [mid for mid, _ in await memory.runtime.records.keyword_search(build_fts_query(query), flt, limit=20)]


async def chunk_rows(memory, document_id: str) -> list[dict]:
    rows = await memory.runtime.db.fetch_all(
        "SELECT memory_id, is_deleted, version FROM booku_memory_records WHERE document_id = ? ORDER BY chunk_index",
        [document_id],
    )
    return [dict(r) for r in rows]


async def test_ingest_markdown_file_writes_titled_chunks_to_every_index(memory, knowledge, tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE_MD, encoding="utf-8")

    result = await knowledge.ingest_document(title="部署指南", file_path=str(path))

    assert result["action"] == "booku_knowledge_ingest" and result["mode"] == "created"
    assert result["title"] == "《部署指南》"
    assert (result["bucket"], result["folder_id"]) == ("knowledge", "default")
    assert result["collection"] == "booku_memory__knowledge"
    assert re.fullmatch(r"doc-[0-9a-f]{32}", result["document_id"])
    assert result["chunk_count"] == 4 and result["version"] == 1 and result["vector_pending"] == 0
    assert result["items"] == [f"kb-{result['document_id']}-{i:04d}" for i in range(1, 5)]
    assert result["source_path"] == path.resolve().as_posix()

    document = await knowledge.get_document(document_id=result["document_id"])
    assert [c["title"] for c in document["chunks"]] == [
        "《部署指南》-片段1：Booku 部署指南",
        "《部署指南》-片段2：Booku 部署指南 > 安装",
        "《部署指南》-片段3：Booku 部署指南 > 配置",
        "《部署指南》-片段4：Booku 部署指南 > Troubleshooting",
    ]
    assert [c["index"] for c in document["chunks"]] == [1, 2, 3, 4]
    assert document["chunks"][2]["content"] == "配置文件是 TOML 格式。端口默认是 8765，可以在 dashboard 小节修改。"
    assert document["chunks"][3]["heading_path"] == ["Booku 部署指南", "Troubleshooting"]

    record = await memory.runtime.records.get(result["items"][1])
    assert (record["bucket"], record["memory_type"], record["folder_id"], record["status"]) == (
        "knowledge",
        "knowledge",
        "default",
        "active",
    )
    assert record["tags"] == ["booku_knowledge", "部署指南"]
    assert "安装" in record["core_tags"] and record["diffusion_tags"]
    assert record["document_id"] == result["document_id"] and record["chunk_index"] == 2

    assert await knowledge_vector_ids(memory, result["items"]) == set(result["items"])
    # the heading (in the chunk title) and the body both feed the keyword index
    assert (await keyword_hits(memory, "Troubleshooting"))[0] == result["items"][3]
    assert (await keyword_hits(memory, "虚拟环境"))[0] == result["items"][1]


async def test_chunks_respect_the_configured_limits(tmp_path: Path) -> None:
    config = {"maintenance": {"enabled": False}, "chunking": {"max_chunk_chars": 100, "overlap_chars": 30}}
    body = "".join(f"第{i}条规则要求值班人员记录处理过程。" for i in range(30))
    async with booku_memory.open(tmp_path / "data", config, embedder=DeterministicTestEmbedder()) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)
        result = await knowledge.ingest_document(title="值班规则", content=f"# 规则\n\n{body}")
        chunks = (await knowledge.get_document(document_id=result["document_id"]))["chunks"]

    assert len(chunks) == result["chunk_count"] > 4
    assert all(len(c["content"]) <= 100 and c["title"].endswith("：规则") for c in chunks)
    for previous, current in zip(chunks, chunks[1:]):
        shared = next(n for n in range(30, 0, -1) if previous["content"].endswith(current["content"][:n]))
        assert shared >= 15  # real overlap, starting at a sentence start
        assert current["content"].startswith("第")


async def test_content_and_file_path_are_exclusive_and_errors_write_nothing(memory, knowledge, tmp_path) -> None:
    path = tmp_path / "a.md"
    path.write_text("正文", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")

    with pytest.raises(ValidationError, match="只能二选一"):
        await knowledge.ingest_document(title="A", content="正文", file_path=str(path))
    with pytest.raises(ValidationError, match="content 与 file_path 不能同时为空"):
        await knowledge.ingest_document(title="A", content="   ")
    with pytest.raises(ValidationError, match="title 不能为空"):
        await knowledge.ingest_document(title=" ", content="正文")
    with pytest.raises(ValidationError, match="title 最多 100 个字符"):
        await knowledge.ingest_document(title="长" * 101, content="正文")
    with pytest.raises(ValidationError, match="没有可入库的文本"):
        await knowledge.ingest_document(title="空", file_path=str(empty))
    with pytest.raises(ValidationError, match="不存在"):
        await knowledge.ingest_document(title="无", file_path=str(tmp_path / "missing.md"))

    assert (await knowledge.list_documents())["total"] == 0
    assert await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records") == 0
    assert await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_knowledge_document_revisions") == 0


async def test_blank_title_uses_the_file_name_and_relative_paths_use_the_data_dir(memory, knowledge) -> None:
    folder = memory.runtime.data_dir / "knowledges"
    folder.mkdir()
    (folder / "运维手册.txt").write_text("重启前先备份数据库。", encoding="utf-8")

    result = await knowledge.ingest_document(title="", file_path="knowledges\\运维手册.txt")

    assert result["title"] == "《运维手册》"
    assert result["source_path"] == "knowledges/运维手册.txt"


async def test_reingest_of_unchanged_text_writes_nothing(memory, knowledge) -> None:
    first = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)
    revisions_before = await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_revisions")

    again = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD.replace("\n", "\r\n") + "\n\n")

    assert again["mode"] == "unchanged" and again["document_id"] == first["document_id"]
    assert again["version"] == 1 and again["changed_chunks"] == 0 and again["items"] == first["items"]
    assert await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_revisions") == revisions_before
    assert len((await knowledge.get_document(document_id=first["document_id"]))["history"]) == 1
    # a different source path is a different document, even with the same title
    other = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD, source="cli")
    assert other["mode"] == "unchanged"


async def test_changed_text_replaces_chunks_atomically_and_keeps_history(memory, knowledge) -> None:
    first = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)
    document_id = first["document_id"]
    shorter = GUIDE_MD.split("## 配置")[0].replace("先创建虚拟环境", "先准备 booku-install 容器")

    updated = await knowledge.ingest_document(title="部署指南", content=shorter)

    assert updated["mode"] == "updated" and updated["document_id"] == document_id
    assert updated["version"] == 2 and updated["chunk_count"] == 2
    document = await knowledge.get_document(document_id=document_id)
    assert [c["index"] for c in document["chunks"]] == [1, 2]
    assert "booku-install" in document["chunks"][1]["content"]
    assert [h["action"] for h in document["history"]] == ["create", "update"]
    old = await knowledge.get_document_revision(document_id=document_id, version=1)
    assert old["content"] == GUIDE_MD.strip()

    dropped = [f"kb-{document_id}-0003", f"kb-{document_id}-0004"]
    assert await knowledge_vector_ids(memory, first["items"]) == set(first["items"][:2])
    assert not set(dropped) & set(await keyword_hits(memory, "Troubleshooting 8765 TOML"))
    assert first["items"][1] in await keyword_hits(memory, "booku-install")
    assert first["items"][1] not in await keyword_hits(memory, "虚拟环境")
    # the unchanged first chunk was not rewritten
    rows = {r["memory_id"]: r for r in await chunk_rows(memory, document_id)}
    assert rows[first["items"][0]]["version"] == 1 and rows[first["items"][1]]["version"] == 2

    # growing again brings the removed positions back with continuous history
    regrown = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD + "\n\n## 附录\n\n更多资料见官网。")
    assert regrown["mode"] == "updated" and regrown["chunk_count"] == 5 and regrown["version"] == 3
    assert await knowledge_vector_ids(memory, regrown["items"]) == set(regrown["items"])
    history = await memory.runtime.records.history(f"kb-{document_id}-0003")
    assert [h["version"] for h in history] == list(range(1, len(history) + 1))
    assert [h["action"] for h in history] == ["knowledge_ingest", "knowledge_remove", "knowledge_update"]


async def test_delete_document_removes_it_from_every_index(memory, knowledge) -> None:
    kept = await knowledge.ingest_document(title="保留", content="另一份文档讲备份策略。")
    result = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)
    await knowledge.ingest_document(title="部署指南", content=GUIDE_MD + "\n\n补充。")

    deleted = await knowledge.delete_document(document_id=result["document_id"])

    assert deleted == {
        "action": "booku_knowledge_delete",
        "document_id": result["document_id"],
        "title": "《部署指南》",
        "deleted_chunks": 4,
    }
    assert await chunk_rows(memory, result["document_id"]) == []
    assert await knowledge_vector_ids(memory, result["items"]) == set()
    assert await keyword_hits(memory, "Troubleshooting 虚拟环境") == []
    assert await knowledge.export_document_titles() == ["《保留》"]
    with pytest.raises(NotFoundError):
        await knowledge.get_document(document_id=result["document_id"])
    with pytest.raises(NotFoundError):
        await knowledge.delete_document(document_id=result["document_id"])
    actions = await memory.runtime.db.fetch_all(
        "SELECT action FROM booku_knowledge_document_revisions WHERE document_id = ? ORDER BY version",
        [result["document_id"]],
    )
    assert [r["action"] for r in actions] == ["create", "update", "delete"]
    assert await knowledge_vector_ids(memory, kept["items"]) == set(kept["items"])


async def test_exports_titles_dump_and_listing(knowledge) -> None:
    await knowledge.ingest_document(title="文档A", content="# 一\n\n甲。\n\n# 二\n\n乙。")
    await knowledge.ingest_document(title="文档B", content="丙。")

    assert await knowledge.export_document_titles() == ["《文档A》", "《文档B》"]
    assert await knowledge.remember_titles_json() == '["《文档A》", "《文档B》"]'

    dump = await knowledge.dump_documents(limit=2)
    assert dump["action"] == "booku_knowledge_dump" and dump["total"] == 2
    assert set(dump["items"][0]) == {"id", "title", "content", "updated_at", "tags"}
    assert all(item["title"].startswith("《文档") and "-片段" in item["title"] for item in dump["items"])
    assert (await knowledge.dump_documents())["total"] == 3

    listing = await knowledge.list_documents()
    assert listing["total"] == 2
    assert [(i["title"], i["chunk_count"]) for i in listing["items"]] == [("《文档B》", 1), ("《文档A》", 2)]
    with pytest.raises(ValidationError, match="limit"):
        await knowledge.dump_documents(limit=0)


async def test_chunks_stay_out_of_memory_only_listings(memory, knowledge) -> None:
    await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)
    service = memory.get_service(booku_memory.MEMORY_SERVICE)

    listing = await service.list_memory_entries()

    assert not any(item["id"].startswith("kb-") for item in listing["items"])


async def test_documents_are_scoped_to_their_store(memory, knowledge) -> None:
    result = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)
    private = Scope(owner_uid="u2", readable_store_keys=("u2",), writable_store_key="u2")
    other = memory.get_service(booku_memory.KNOWLEDGE_SERVICE, scope=private)

    assert await other.export_document_titles() == []
    with pytest.raises(NotFoundError):
        await other.delete_document(document_id=result["document_id"])
    mine = await other.ingest_document(title="部署指南", content=GUIDE_MD)
    assert mine["mode"] == "created" and mine["document_id"] != result["document_id"]
    assert await other.export_document_titles() == ["《部署指南》"]


async def test_mechanical_scope_cannot_ingest_but_agent_writes_carry_their_authority(memory, knowledge) -> None:
    mechanical = Scope(authority="mechanical", cause="维护任务")
    maintenance = memory.get_service(booku_memory.KNOWLEDGE_SERVICE, scope=mechanical)

    with pytest.raises(ValidationError, match="mechanical"):
        await maintenance.ingest_document(title="维护", content="不应写入。")
    await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)

    authorities = await memory.runtime.db.fetch_all("SELECT DISTINCT authority FROM booku_memory_revisions")
    assert [row["authority"] for row in authorities] == ["agent"]


async def test_concurrent_ingests_of_one_document_create_it_once(memory, knowledge) -> None:
    results = await asyncio.gather(*(knowledge.ingest_document(title="并发", content=GUIDE_MD) for _ in range(4)))

    assert sorted(r["mode"] for r in results) == ["created", "unchanged", "unchanged", "unchanged"]
    assert len({r["document_id"] for r in results}) == 1
    assert (await knowledge.list_documents())["total"] == 1


async def test_ingest_without_embedder_is_keyword_searchable_and_reports_pending_vectors(tmp_path: Path) -> None:
    from booku_memory.services.embedding.deterministic import UnavailableEmbedder

    config = {"maintenance": {"enabled": False}}
    async with booku_memory.open(tmp_path / "data", config, embedder=UnavailableEmbedder()) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)

        result = await knowledge.ingest_document(title="部署指南", content=GUIDE_MD)

        assert result["mode"] == "created" and result["vector_pending"] == result["chunk_count"] == 4
        assert (await keyword_hits(memory, "Troubleshooting"))[0] == result["items"][3]
