"""Embeddings and the dreaming chat model through the host's model tasks (``llm_api``)."""

from src.app.plugin_system.api import llm_api

from ..config import BookuConfig
from ..services.embedding.base import Embedder
from ..services.embedding.factory import build_embedder
from ..services.errors import EmbeddingUnavailableError
from . import logger


def host_chat_fn(config: BookuConfig):
    """The dreaming stages' light chat model: the host's ``[dreaming] host_task`` model set (None for other providers).

    Returns an async ``messages -> text`` function; the evidence package wraps it in its ChatModel interface and
    reports "unavailable" (never silently skipping) when the host has no such task.
    """
    if config.dreaming.chat_provider != "host":
        return None
    from src.kernel.llm import ROLE, LLMPayload, Text

    task = config.dreaming.host_task

    async def complete(messages: list[dict[str, str]]) -> str:
        request = llm_api.create_llm_request(llm_api.get_model_set_by_task(task), request_name="booku_dreaming")
        for message in messages:
            role = ROLE.SYSTEM if message.get("role") == "system" else ROLE.USER
            request.add_payload(LLMPayload(role, Text(message.get("content", ""))))
        response = await request.send(stream=False)
        return str(await response or "")

    return complete


def host_embedder(config: BookuConfig) -> Embedder | None:
    """The ``host`` provider bound to the host's ``llm_api``; ``None`` for other providers (the runtime builds them).

    Only the FIRST model of the task is used: the host fails over between the models of a task, and vectors of two
    different models must never end up in one index. The model identifier keys the embedding cache and the index,
    so swapping the host's model is detected (and answered with the reindex hint) instead of mixing vectors.
    """
    section = config.embedding
    if section.provider != "host":
        return None
    task = section.host_task
    try:
        model_set = list(llm_api.get_model_set_by_task(task))[:1]
        if not model_set:
            raise ValueError("任务没有配置任何模型")
    except Exception as exc:  # the host raises ValueError/KeyError for a missing task; keep running on keywords
        reason = f"宿主 config/model.toml 中没有可用的嵌入任务 [model_tasks.{task}]：{exc}"

        async def unavailable(texts: list[str]) -> list[list[float]]:
            raise EmbeddingUnavailableError(reason)

        logger.warning(reason)
        return build_embedder(section, host_request_fn=unavailable, host_model_id=f"host/{task}")

    async def embed(texts: list[str]) -> list[list[float]]:
        request = llm_api.create_embedding_request(model_set, request_name="booku_memory", inputs=list(texts))
        response = await request.send()
        return response.embeddings

    identifier = str(model_set[0].get("model_identifier") or task)
    return build_embedder(section, host_request_fn=embed, host_model_id=f"host/{identifier}")
