"""The command line as a script or a person uses it: text by default, ``--json`` for scripts, exit codes that a
shell can test, quiet on a closed pipe, paths relative to where it is run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import zipfile

from .conftest import CLI_ENV, run_cli

OPTS = ("--config", "booku.toml")


def _notes(root):
    notes = root / "notes"
    (notes / "旅行").mkdir(parents=True)
    (notes / ".obsidian").mkdir()
    (notes / "泡茶.md").write_text("# 泡茶\n\n乌龙茶用沸水冲泡。\n", encoding="utf-8")
    (notes / "旅行" / "青岛.txt").write_bytes("去年七月在青岛八大关散步。".encode("gbk"))
    (notes / ".obsidian" / "workspace.md").write_text("隐藏的配置\n", encoding="utf-8")
    (notes / "照片.jpg").write_bytes(b"\xff\xd8\xff")
    return notes


def test_ingest_folder_recursively_with_progress_and_summary(workdir):
    _notes(workdir)
    first = run_cli(workdir, "ingest", "notes/", *OPTS)
    assert first.returncode == 0, first.stderr
    assert "共 2 个文件，新建 2" in first.stdout
    assert "忽略不支持的文件 1" in first.stdout
    assert "2/2" in first.stderr  # the progress bar
    again = run_cli(workdir, "ingest", "notes", *OPTS, "--json")
    summary = json.loads(again.stdout)
    assert (summary["total_files"], summary["ingested"], summary["skipped"]) == (2, 0, 2)
    found = run_cli(workdir, "command", "search -q 八大关 --include-knowledge", *OPTS)
    assert "青岛" in found.stdout, found.stdout + found.stderr


def test_ingest_missing_path_names_what_was_typed_and_fails(workdir):
    result = run_cli(workdir, "ingest", "nowhere/", *OPTS)
    assert result.returncode == 2
    assert "找不到 nowhere/" in result.stderr
    assert "Traceback" not in result.stderr


def test_ingest_folder_with_a_broken_file_names_it_and_exits_1(workdir):
    notes = _notes(workdir)
    (notes / "坏掉的.docx").write_bytes(b"not a zip")
    result = run_cli(workdir, "ingest", "notes", *OPTS)
    assert result.returncode == 1
    assert "新建 2" in result.stdout and "失败 1" in result.stdout
    assert "notes/坏掉的.docx" in result.stdout


def test_ingest_docx_file_from_cwd(workdir):
    docx = workdir / "手册.docx"
    body = (
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        "<w:p><w:r><w:t>备份每周日执行</w:t></w:r></w:p></w:body></w:document>"
    )
    with zipfile.ZipFile(docx, "w") as archive:
        archive.writestr("word/document.xml", body)
    result = run_cli(workdir, "ingest", "手册.docx", *OPTS)
    assert result.returncode == 0, result.stderr
    assert "新建 1" in result.stdout


def test_command_help_is_readable_text_and_json_on_request(workdir):
    text = run_cli(workdir, "command", "help", *OPTS)
    assert text.returncode == 0
    assert text.stdout.startswith("# Booku 记忆工具手册\n")
    assert "\\n" not in text.stdout
    as_json = json.loads(run_cli(workdir, "command", "help", *OPTS, "--json").stdout)
    assert as_json["ok"] is True and as_json["results"][0]["result"]["content"].startswith("# Booku")


def test_command_that_fails_exits_non_zero(workdir):
    result = run_cli(workdir, "command", "search -q 张三 && frobnicate", *OPTS)
    assert result.returncode == 1
    assert "frobnicate" in result.stdout
    ok = run_cli(workdir, "command", "search -q 张三", *OPTS)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_closed_pipe_ends_quietly(workdir):
    process = subprocess.Popen(
        [sys.executable, "-m", "booku_memory", "command", "help", *OPTS],
        cwd=workdir,
        env=CLI_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()  # like `| head` that has already exited
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_export_writes_where_it_is_told_relative_to_cwd(workdir):
    (workdir / "backup").mkdir()
    run_cli(workdir, "memo", "明天交报告", *OPTS)
    sub = workdir / "elsewhere"
    sub.mkdir()
    result = run_cli(
        sub,
        "export",
        "../backup/all.jsonl",
        "--data-dir",
        str(workdir / "data"),
        "--config",
        str(workdir / "booku.toml"),
    )
    assert result.returncode == 0, result.stderr
    assert (workdir / "backup" / "all.jsonl").stat().st_size > 0
    assert str(workdir / "backup" / "all.jsonl") in result.stdout
    missing = run_cli(workdir, "export", "no/such/dir/all.jsonl", *OPTS)
    assert missing.returncode == 2 and "no/such/dir/all.jsonl" in missing.stderr


def test_serve_on_a_busy_port_fails_fast_with_a_hint(workdir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = run_cli(workdir, "serve", "--port", str(port), *OPTS, timeout=60)
    assert result.returncode == 2
    assert f"端口 {port} 已被占用" in result.stderr and "--port" in result.stderr
    assert "已启动" not in result.stdout
    assert time.monotonic() - started < 30
