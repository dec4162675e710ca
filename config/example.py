"""Render ``config/example.toml`` from the schema, so the example can never drift from the real defaults."""

from __future__ import annotations

import dataclasses
import json

from .schema import BookuConfig

SECTION_NOTES = {
    "plugin": "插件开关与系统提示注入",
    "storage": "存储位置（相对路径以数据目录为基准）",
    "vector": "向量索引：embedded = 本机内嵌 Chroma；http = 连接 Chroma 服务器",
    "embedding": "嵌入模型：local = 内置 multilingual-e5-small（离线）；openai = 任意 OpenAI 兼容 "
    "/v1/embeddings；host = 宿主的 embedding 任务；none = 仅关键词检索",
    "retrieval": "检索与 EPA 重塑参数",
    "write_conflict": "写入时的相似合并判定",
    "time_window": "隐现记忆（emergent）的生命周期",
    "maintenance": "后台维护任务（过期便签、生命周期、向量补建）",
    "memo": "临时备忘录",
    "flashback": "记忆闪回（宿主内随机回忆旧记忆）",
    "chunking": "知识库文档切分",
    "startup_ingest": "启动时入库的知识目录",
    "tools": "LLM 工具输出预算",
    "dashboard": "管理后台（api_key 为空时 serve 会生成并保存到数据目录；自行设置时至少 24 个字符；host "
    "不是本机回环地址时 serve 需要 --allow-remote）",
    "surfacing": "伴侣记忆浮现（breath 系列）",
    "decay": "伴侣记忆衰减引擎（固定/保护/锚点永不衰减）",
    "evidence": "聊天证据：收录消息（不可修改，只能撤回）与聊天召回",
    "dreaming": "梦境整理：A 阶段把聊天摘要成剧集，B 阶段提出待人工审核的记忆提案（需要模型，默认关闭）",
    "mcp": "MCP 服务（python -m booku_memory mcp [--http]）：连接所代表的唯一主人与库；HTTP "
    "令牌（自行设置时至少 24 个字符）",
    "scope": "归属与隔离：single = 单一主人共用一个库；per_chat = 每个私聊对象、每个群各自一个库（见 docs/SCOPES.md）",
}


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def render_example() -> str:
    config = BookuConfig()
    lines = ["# Booku Memory 配置示例：所有键及其默认值。未知键或越界值会在启动时报错。", ""]
    for section_field in dataclasses.fields(config):
        section = getattr(config, section_field.name)
        lines.append(f"# {SECTION_NOTES.get(section_field.name, '')}")
        lines.append(f"[{section_field.name}]")
        for f in dataclasses.fields(section):
            notes = []
            if f.metadata.get("doc"):
                notes.append(f.metadata["doc"])
            if "range" in f.metadata:
                notes.append(f"范围 {f.metadata['range'][0]}–{f.metadata['range'][1]}")
            if "choices" in f.metadata:
                notes.append("可选 " + " / ".join(f.metadata["choices"]))
            comment = f"  # {'; '.join(notes)}" if notes else ""
            lines.append(f"{f.name} = {_toml_value(getattr(section, f.name))}{comment}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_example(), end="")
