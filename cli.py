"""Command line: ``python -m booku_memory <serve|command|reindex|check|export|import|ingest|manifest|mcp>``.

Every sub-command gets its memory the way the library does (``booku_memory.open``): when ``serve``, an MCP server
or another owner already holds the data dir, the command runs through that process (``owner_client``), so the CLI,
the dashboard and other programs see one store and its one set of indexes. ``serve`` itself must own the data dir.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .cli_output import EXIT_INVALID, emit, silence_broken_pipe
from .config import BookuConfig, load_config
from .services.errors import BookuError, ValidationError


def progress_bar(done: int, total: int, label: str) -> None:
    """A one-line progress bar on stderr (long jobs: reindex, import, ingest)."""
    total = max(total, 1)
    width = 30
    filled = int(width * min(done, total) / total)
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _config(args: argparse.Namespace) -> BookuConfig:
    return load_config(args.config) if args.config else load_config(None)


async def _with_memory(args: argparse.Namespace, job, *, check_model: bool = True) -> Any:
    from .services.embedding.deterministic import testing_embedder_from_env
    from .standalone import open_memory

    async with open_memory(
        args.data_dir, _config(args), check_model=check_model, entry_point="cli", embedder=testing_embedder_from_env()
    ) as memory:
        return await job(memory)


STOP_GRACE_SECONDS = 5


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen_host(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback listen address unless the operator said ``--allow-remote``; warn loudly when they did.

    The dashboard speaks plain HTTP: off loopback, the key and every memory cross the network readable by anyone
    on the path, so exposing it must be a deliberate choice, made with TLS in front.
    """
    from .services.errors import ConfigError

    if is_loopback_host(host):
        return
    if not allow_remote:
        raise ConfigError(
            f"监听地址 {host} 不是本机回环地址：管理后台只提供明文 HTTP，密钥和全部记忆会在网络上明文传输。"
            "请保持 127.0.0.1，或在前面放一个提供 TLS（HTTPS）的反向代理后加 --allow-remote 再启动"
        )
    print(
        f"警告：管理后台将在 {host} 上以明文 HTTP 对外提供服务。务必在前面放 TLS（HTTPS）反向代理，"
        "并只让可信网络访问。",
        file=sys.stderr,
    )


async def run_serve(args: argparse.Namespace) -> None:
    import uvicorn

    from .cli_port import claim_port
    from .router.app import create_dashboard_app
    from .router.auth import ensure_api_key
    from .router.settings import DashboardSettings
    from .services.embedding.deterministic import testing_embedder_from_env
    from .standalone import open_memory

    config = _config(args)
    host = args.host or config.dashboard.host
    port = args.port or config.dashboard.port
    check_listen_host(host, allow_remote=args.allow_remote)
    listener = claim_port(host, port)  # before anything is opened or printed: a busy port fails at once
    async with open_memory(
        args.data_dir,
        config,
        entry_point="serve",
        accept_clients=True,
        connect=False,
        embedder=testing_embedder_from_env(),
    ) as memory:
        runtime = memory.runtime
        api_key = ensure_api_key(runtime.data_dir, config)
        runtime.knowledge_service().schedule_startup_ingest()
        app = create_dashboard_app(lambda: runtime, settings=DashboardSettings.from_config(config, api_key=api_key))
        print(f"Booku Memory 已启动：数据目录 {runtime.data_dir}")
        print(f"管理后台：http://{host}:{port}/login  （API Key 保存在 {runtime.data_dir / 'dashboard_api_key'}）")
        if runtime.degraded_reason():
            print(f"注意：嵌入模型不可用，检索退化为关键词模式：{runtime.degraded_reason()}")
        # Wrong key guesses queued behind the throttle must not hold up a Ctrl+C: requests still running after
        # STOP_GRACE_SECONDS are cut off.
        server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=STOP_GRACE_SECONDS)
        )
        await server.serve(sockets=[listener])


async def run_command(args: argparse.Namespace) -> Any:
    async def job(memory):
        return await memory.run_memory_command(args.text, stream_id=args.stream)

    return await _with_memory(args, job)


async def run_memo(args: argparse.Namespace) -> Any:
    async def job(memory):
        service = memory.get_service("booku_memory:service:booku_memory")
        return await service.create_temporary_memo(content=args.content, expire_hours=args.hours, stream_id=args.stream)

    return await _with_memory(args, job)


async def run_reindex(args: argparse.Namespace) -> Any:
    async def job(memory):
        return await memory.reindex(progress=progress_bar)

    return await _with_memory(args, job, check_model=False)


async def run_check(args: argparse.Namespace) -> Any:
    from .services.integrity import check_store

    async def job(memory):
        return await check_store(memory.runtime, repair=args.repair)

    return await _with_memory(args, job)


def _path_in_cwd(typed: str, *, what: str) -> Path:
    """A file path as the user typed it, relative to the current directory (not the data directory)."""
    path = (Path.cwd() / Path(typed.strip()).expanduser()).resolve()
    if not path.parent.is_dir():
        raise ValidationError(f"{what}的目录不存在：{typed}（{path.parent}），请先创建它或换一个路径")
    return path


async def run_export(args: argparse.Namespace) -> Any:

    target = _path_in_cwd(args.file, what="导出文件")

    async def job(memory):
        counts = await memory.export_jsonl(str(target), progress=progress_bar)
        return {"file": str(target), **counts}

    return await _with_memory(args, job)


async def run_import(args: argparse.Namespace) -> Any:
    async def job(memory):
        return await memory.import_jsonl(args.file, progress=progress_bar)

    return await _with_memory(args, job)


async def run_ingest(args: argparse.Namespace) -> Any:
    async def job(memory):
        knowledge = memory.get_service("booku_memory:service:booku_knowledge")
        if args.path and args.title:
            return await knowledge.ingest_document(title=args.title, file_path=args.path, source="cli")
        if args.path:
            return await knowledge.ingest_path(
                args.path, progress=lambda done, total, _: progress_bar(done, total, "入库知识文件")
            )
        return await knowledge.ingest_folders()

    return await _with_memory(args, job)


async def run_mcp(args: argparse.Namespace) -> None:
    from .mcp_server import serve

    await serve(
        args.data_dir, _config(args), http=args.http, port=args.port, owner_uid=args.owner, store_key=args.store
    )


def run_manifest(args: argparse.Namespace) -> None:
    from .manifest_tools import write_manifest

    root = Path(__file__).resolve().parent
    write_manifest(root / "plugin.toml", root / "manifest.json")
    print(f"已根据 plugin.toml 生成 {root / 'manifest.json'}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m booku_memory", description="Booku Memory 长期记忆服务")
    sub = parser.add_subparsers(dest="action", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--data-dir", default="data", help="数据目录（默认 ./data）")
        p.add_argument("--config", default=None, help="TOML 配置文件（见 config/example.toml）")
        p.add_argument("--json", action="store_true", help="以 JSON 输出结果（供脚本使用；默认输出易读文本）")
        return p

    serve = common(sub.add_parser("serve", help="启动记忆服务与管理后台"))
    serve.add_argument("--host", default=None, help="监听地址（默认 127.0.0.1）")
    serve.add_argument("--port", type=int, default=None, help="端口（默认 8765）")
    serve.add_argument(
        "--allow-remote", action="store_true", help="允许监听非回环地址（明文 HTTP：请务必在前面放 TLS 反向代理）"
    )
    command = common(sub.add_parser("command", help="像 LLM 一样执行一条 memory_command"))
    command.add_argument("text", help='例如 "search -query 大学同学"')
    command.add_argument("--stream", default=None, help="聊天流 ID（临时备忘录用）")
    memo = common(sub.add_parser("memo", help="写一条临时备忘录"))
    memo.add_argument("content")
    memo.add_argument("--hours", type=float, default=2.0)
    memo.add_argument("--stream", default=None)
    common(sub.add_parser("reindex", help="用当前嵌入模型重建全部向量与关键词索引"))
    check = common(sub.add_parser("check", help="核对向量与关键词索引、待同步队列是否与数据库一致"))
    check.add_argument("--repair", action="store_true", help="从数据库修复派生索引（不改动记忆本身）")
    export = common(sub.add_parser("export", help="导出全部记忆（JSON Lines，含历史）"))
    export.add_argument("file")
    imp = common(sub.add_parser("import", help="导入导出文件（幂等）"))
    imp.add_argument("file")
    ingest = common(sub.add_parser("ingest", help="入库知识文档或整个文件夹（递归）；不给路径则扫描配置的知识目录"))
    ingest.add_argument("path", nargs="?", default=None, help="文件或文件夹；相对路径先在当前目录下找")
    ingest.add_argument("--title", default=None, help="单个文件的标题（默认用文件名）")
    sub.add_parser("manifest", help="根据 plugin.toml 生成 manifest.json")
    mcp = common(sub.add_parser("mcp", help="作为 MCP 服务运行（默认 stdio；--http 为带令牌的 streamable HTTP）"))
    mcp.add_argument("--http", action="store_true", help="在 127.0.0.1 上提供 streamable HTTP（需 Bearer 令牌）")
    mcp.add_argument("--port", type=int, default=None, help="HTTP 端口（默认 mcp.port，缺省 8766）")
    mcp.add_argument("--owner", default=None, help="记忆主人（默认 mcp.owner_uid，缺省 default）")
    mcp.add_argument("--store", default=None, help="读写的记忆库（默认 mcp.store_key，缺省 shared）")
    return parser


RUNNERS = {
    "serve": run_serve,
    "command": run_command,
    "memo": run_memo,
    "reindex": run_reindex,
    "check": run_check,
    "export": run_export,
    "import": run_import,
    "ingest": run_ingest,
    "mcp": run_mcp,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; returns the exit code (0 done, 1 the result says it failed, 2 invalid input)."""
    args = build_parser().parse_args(argv)
    try:
        if args.action == "manifest":
            run_manifest(args)
            return 0
        result = asyncio.run(RUNNERS[args.action](args))
        if result is None:
            return 0
        code = emit(result, as_json=args.json)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return silence_broken_pipe()
    except BookuError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
