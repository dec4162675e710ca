"""Startup ingest of configured knowledge folders (BookuKnowledgeService.ingest_folders)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("word/document.xml", f'<w:document xmlns:w="{W_NS}"><w:body>{body}</w:body></w:document>')
    return path


def config(paths: list[str], **options) -> dict:
    return {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": True, "paths": paths, **options}}


def build_tree(data_dir: Path, outside: Path) -> dict[str, Path]:
    return {
        "install": write(data_dir / "kb" / "guides" / "install.md", "# 安装\n\n先装依赖，再启动服务。"),
        "faq": write(data_dir / "kb" / "guides" / "sub" / "deep" / "faq.md", "# 常见问题\n\n端口冲突时修改配置。"),
        "hidden": write(data_dir / "kb" / "guides" / ".drafts" / "secret.md", "草稿不入库"),
        "image": write(data_dir / "kb" / "guides" / "logo.png", "not really a png"),
        "empty": write(data_dir / "kb" / "guides" / "empty.md", "\n\n"),
        "todo": write(data_dir / "kb" / "notes" / "todo.txt", "Back up the database every Friday."),
        "manual": write_docx(outside / "manual.docx", ["用户手册第一段。", "第二段讲备份。"]),
    }


async def test_folder_tree_is_ingested_recursively_with_summary_and_progress(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    files = build_tree(data_dir, tmp_path / "outside")
    paths = ["kb\\guides", "kb/notes", str(files["manual"]), "missing\\folder"]
    lines: list[str] = []
    async with booku_memory.open(data_dir, config(paths), embedder=DeterministicTestEmbedder()) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)

        first = await knowledge.ingest_folders(progress=lines.append)

        assert (
            first["total_files"],
            first["ingested"],
            first["updated"],
            first["skipped"],
            first["failed"],
            first["ignored"],
        ) == (5, 4, 0, 1, 1, 1)
        assert first["failures"] == [{"path": str(files["empty"]), "reason": first["failures"][0]["reason"]}]
        assert "没有可入库的文本" in first["failures"][0]["reason"]
        assert first["skipped_reasons"][0]["path"] == str(data_dir / "missing" / "folder")
        assert sorted(await knowledge.export_document_titles()) == sorted(
            ["《install》", "《sub/deep/faq》", "《todo》", "《manual》"]
        )
        listing = {item["raw_title"]: item for item in (await knowledge.list_documents())["items"]}
        assert listing["sub/deep/faq"]["source_path"] == "kb/guides/sub/deep/faq.md"
        assert listing["manual"]["source_path"] == files["manual"].resolve().as_posix()
        assert listing["install"]["source"] == "startup_ingest"
        authorities = await memory.runtime.db.fetch_all("SELECT DISTINCT authority FROM booku_memory_records")
        assert [row["authority"] for row in authorities] == ["source_learning"]
        assert lines[0] == "知识库启动入库：发现 5 个文件"
        assert any(line.startswith("[1/5] ") for line in lines)
        assert any(line.startswith("知识库启动入库完成：新建 4，更新 0，跳过 1，失败 1") for line in lines)

        second = await knowledge.ingest_folders()
        assert (second["ingested"], second["updated"], second["skipped"], second["failed"]) == (0, 0, 5, 1)

        write(files["faq"], "# 常见问题\n\n端口冲突时修改配置。\n\n# 新问题\n\n日志在 logs 目录。")
        files["empty"].unlink()
        third = await knowledge.ingest_folders()
        assert (third["ingested"], third["updated"], third["skipped"], third["failed"]) == (0, 1, 4, 0)
        faq = next(i for i in (await knowledge.list_documents())["items"] if i["raw_title"] == "sub/deep/faq")
        assert faq["version"] == 2 and faq["chunk_count"] == 2


async def test_a_file_ingested_by_hand_keeps_its_document_at_startup(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = write(data_dir / "knowledges" / "arch.md", "# 架构\n\n三层结构。")
    async with booku_memory.open(data_dir, config(["knowledges"]), embedder=DeterministicTestEmbedder()) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)
        manual = await knowledge.ingest_document(title="架构说明", file_path=str(path))

        summary = await knowledge.ingest_folders()

        assert (summary["ingested"], summary["skipped"]) == (0, 1)
        assert await knowledge.export_document_titles() == ["《架构说明》"]
        write(path, "# 架构\n\n四层结构。")
        assert (await knowledge.ingest_folders())["updated"] == 1
        document = await knowledge.get_document(document_id=manual["document_id"])
        assert document["version"] == 2 and document["chunks"][0]["content"] == "四层结构。"


async def test_flat_walk_missing_path_policy_and_disabled_ingest(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write(data_dir / "kb" / "top.md", "顶层文件。")
    write(data_dir / "kb" / "nested" / "inner.md", "子目录文件。")
    options = {"recursive": False, "skip_missing_paths": False}
    async with booku_memory.open(
        data_dir, config(["kb", "nowhere"], **options), embedder=DeterministicTestEmbedder()
    ) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)
        summary = await knowledge.ingest_folders()
        assert (summary["ingested"], summary["failed"], summary["skipped"]) == (1, 1, 0)
        assert "配置的路径不存在" in summary["failures"][0]["reason"]
        assert await knowledge.export_document_titles() == ["《top》"]

    disabled = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False, "paths": ["kb"]}}
    async with booku_memory.open(data_dir, disabled, embedder=DeterministicTestEmbedder()) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)
        assert knowledge.schedule_startup_ingest() is None
        assert (await knowledge.ingest_folders())["enabled"] is False


async def test_background_ingest_runs_as_a_runtime_task(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    for number in range(5):
        write(data_dir / "knowledges" / f"doc{number}.md", f"# 文档{number}\n\n内容{number}。")
    async with booku_memory.open(data_dir, config(["knowledges"]), embedder=DeterministicTestEmbedder()) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)

        task = knowledge.schedule_startup_ingest()
        # the caller gets control back at once; a live write meanwhile is not blocked out
        live = await knowledge.ingest_document(title="实时写入", content="会话中写入的知识。")
        summary = await task

        assert live["mode"] == "created"
        assert summary["ingested"] == 5 and summary["failed"] == 0
        assert len(await knowledge.export_document_titles()) == 6
