"""Test helpers: a deterministic stand-in chat model and a conversation recorder.

``ScriptedChatModel`` is FOR TESTS ONLY. It has the same interface as the real providers
(``OpenAICompatibleChatModel``, ``HostChatModel``): ``model_id`` and ``async complete(messages, *, max_tokens,
temperature) -> str``. It reads the task's JSON input the way a model would read the prompt and answers from a
script, so every run of a test gives the same episodes and proposals.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from booku_memory.services.evidence import evidence_hub, record_host_message
from booku_memory.services.evidence.chat_model import ChatModelUnavailableError
from booku_memory.services.evidence.prompts import EPISODE_TASK_MARK, PROPOSAL_TASK_MARK, task_input

ProposalScript = Callable[[dict[str, Any]], list[dict[str, Any]]]


def summarise_window(task: dict[str, Any]) -> dict[str, str]:
    """Stage A answer: the first message as topic, every message as ``sender：text`` in the summary."""
    messages = task["messages"]
    return {"topic": messages[0]["text"][:12], "summary": "；".join(f"{m['sender']}：{m['text']}" for m in messages)}


class ScriptedChatModel:
    """FOR TESTS ONLY — a deterministic stand-in for the dreaming chat model (see the module docstring).

    ``proposals(task)`` answers stage B (default: no proposals). ``fail_next(n)`` makes the next ``n`` calls raise
    ``ChatModelUnavailableError`` like a model outage; ``garble_next(n)`` makes them return prose without JSON.
    ``calls`` keeps every prompt it was sent.
    """

    model_id = "scripted/stand-in"

    def __init__(self, proposals: ProposalScript | None = None) -> None:
        self.proposals = proposals or (lambda task: [])
        self.calls: list[list[dict[str, str]]] = []
        self._failures = 0
        self._garbled = 0

    def fail_next(self, count: int = 1) -> None:
        self._failures += count

    def garble_next(self, count: int = 1) -> None:
        self._garbled += count

    def tasks(self, mark: str) -> list[dict[str, Any]]:
        """The JSON inputs of the calls of one task kind (EPISODE_TASK_MARK / PROPOSAL_TASK_MARK)."""
        return [task_input(call) for call in self.calls if mark in call[-1]["content"]]

    async def complete(self, messages, *, max_tokens: int, temperature: float) -> str:
        self.calls.append([dict(m) for m in messages])
        if self._failures:
            self._failures -= 1
            raise ChatModelUnavailableError("脚本模型：模拟的服务中断")
        if self._garbled:
            self._garbled -= 1
            return "抱歉，我现在无法回答。"
        content = messages[-1]["content"]
        task = task_input(messages)
        if EPISODE_TASK_MARK in content:
            return json.dumps(summarise_window(task), ensure_ascii=False)
        if PROPOSAL_TASK_MARK in content:
            return (
                "好的，提案如下：\n```json\n"
                + json.dumps({"proposals": self.proposals(task)}, ensure_ascii=False)
                + "\n```"
            )
        raise AssertionError(f"未知的任务：{content[:40]}")


def find_message(task: dict[str, Any], needle: str) -> tuple[str, str] | None:
    """``(message id, episode id)`` of the first message in a stage B input whose text contains ``needle``."""
    for episode in task["episodes"]:
        for message in episode["messages"]:
            if needle in message["text"]:
                return message["id"], episode["id"]
    return None


async def say(
    runtime: Any,
    stream_id: str,
    text: str,
    sent_at: float,
    *,
    sender: str = "u1",
    name: str = "小明",
    direction: str = "received",
    chat_type: str = "private",
    message_id: str | None = None,
    wait_for_vector: bool = True,
) -> str:
    """Record one message of a QQ chat and return its evidence id.

    The vector is computed in the background after capture; ``wait_for_vector`` waits for it, so a search right
    after sees both routes (tests must not depend on how fast the background task is).
    """
    result = await record_host_message(
        runtime,
        message_id=message_id or f"{stream_id}-{sent_at}",
        stream_id=stream_id,
        platform="qq",
        chat_type=chat_type,
        sender_id=sender,
        sender_name=name,
        text=text,
        sent_at=sent_at,
        direction=direction,
    )
    assert result["recorded"], result
    if wait_for_vector:
        await evidence_hub(runtime).vectors.drain()
    return result["entry_id"]


async def db_bytes(runtime: Any) -> bytes:
    """The SQLite database file and its WAL, as bytes on disk now."""
    path = runtime.db.path
    data = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        data += wal.read_bytes()
    return data
