"""Uploads and folder ingests through BookuKnowledgeService on a real store: one reader for bytes and files, and
an upload of an existing document is a re-ingest, never a second document."""

from __future__ import annotations

import pytest

import booku_memory
from booku_memory.services.errors import ValidationError


@pytest.fixture
def knowledge(memory):
    return memory.get_service(booku_memory.KNOWLEDGE_SERVICE)


async def test_upload_decodes_gbk_and_utf16_like_a_file(knowledge):
    gbk = await knowledge.ingest_upload(file_name="菜谱.txt", data="红烧肉要小火慢炖。".encode("gbk"))
    utf16 = await knowledge.ingest_upload(file_name="notes.md", data="# 笔记\n\n周末去爬山。".encode("utf-16"))
    assert gbk["mode"] == utf16["mode"] == "created" and gbk["title"] == "《菜谱》"
    document = await knowledge.get_document(document_id=gbk["document_id"])
    assert "小火慢炖" in str(document)


async def test_upload_with_the_same_text_under_another_name_is_unchanged(knowledge):
    first = await knowledge.ingest_upload(file_name="a.md", data="# 茶\n\n乌龙茶用沸水。".encode())
    again = await knowledge.ingest_upload(file_name="茶的副本.md", data="# 茶\n\n乌龙茶用沸水。".encode())
    assert again["mode"] == "unchanged" and again["document_id"] == first["document_id"]
    assert (await knowledge.list_documents())["total"] == 1


async def test_upload_named_like_a_folder_file_updates_that_document(knowledge, tmp_path):
    folder = tmp_path / "notes" / "旅行"
    folder.mkdir(parents=True)
    (folder / "青岛.md").write_text("# 青岛\n\n八大关散步。\n", encoding="utf-8")
    summary = await knowledge.ingest_path(str(tmp_path / "notes"))
    assert summary["ingested"] == 1
    updated = await knowledge.ingest_upload(file_name="青岛.md", data="# 青岛\n\n八大关散步，吃海鲜。\n".encode())
    assert updated["mode"] == "updated" and updated["version"] == 2
    assert (await knowledge.list_documents())["total"] == 1


async def test_bad_uploads_are_refused_before_anything_is_written(knowledge):
    for name, data, words in (
        ("scan.pdf", b"%PDF-1.4", "不受支持"),
        ("x.txt", b"\x00\x01", "二进制"),
        ("empty.md", b"  \n", "没有可入库的文本"),
        ("", b"abc", "缺少文件名"),
    ):
        with pytest.raises(ValidationError, match=words):
            await knowledge.ingest_upload(file_name=name, data=data)
    assert (await knowledge.list_documents())["total"] == 0


async def test_ingest_path_reports_each_file_and_names_paths_as_given(knowledge, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs" / ".git").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text("# A\n\n甲。\n", encoding="utf-8")
    (tmp_path / "docs" / "bad.docx").write_bytes(b"not a zip")
    (tmp_path / "docs" / ".git" / "HEAD.md").write_text("隐藏\n", encoding="utf-8")
    seen = []
    summary = await knowledge.ingest_path("docs", progress=lambda done, total, path: seen.append((done, total, path)))
    assert seen == [(1, 2, "docs/a.md"), (2, 2, "docs/bad.docx")]
    assert (summary["ingested"], summary["failed"]) == (1, 1)
    assert summary["failures"][0]["path"] == "docs/bad.docx" and "docx" in summary["failures"][0]["reason"]
    with pytest.raises(ValidationError, match="找不到 nothere"):
        await knowledge.ingest_path("nothere")


async def test_suggest_tags_offers_the_most_used_tags_first(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    for core in (["篮球"], ["篮球", "朋友"], ["朋友"], ["篮球"]):
        await service.create_memory(
            title=f"记忆{len(core)}",
            content=f"关于{'、'.join(core)}的第{id(core)}条记忆",
            core_tags=core,
            diffusion_tags=["运动"],
            opposing_tags=["工作"],
        )
    tags = await service.suggest_tags(limit=5)
    assert tags["core_tags"] == ["篮球", "朋友"]
    assert tags["diffusion_tags"] == ["运动"] and tags["opposing_tags"] == ["工作"]
