"""feel(query): "what I am thinking about now — how did I feel about it before?"

Only feelings (kind ``feel``, written with ``hold(feel=True, ...)``) are candidates. With the model, a feeling is a hit
when its cosine similarity to the query is at least ``FEEL_MIN_SIMILARITY``, so the same thing said differently is
found; nothing below the line is returned to fill the answer. Without the model the answer says so and falls back to
literal keyword matching (at least ``FEEL_KEYWORD_MIN_SHARE`` of the query's search terms must occur in the feeling).
Bodies are whole and verbatim; a token budget drops whole feelings, never part of one.

Every feeling of the readable stores is scored (archived ones too: feelings do not decay), rather than asking the
vector index for its nearest records, because the nearest records of a large store may all be other kinds. The
passages come from the embedding cache the vector outbox fills, so this costs no model call for stored feelings.
"""

from __future__ import annotations

import time
from typing import Any

from ..logic.text import compose_embedding_text
from ..storage.record_filter import RecordFilter
from . import fields as f
from .decay_engine import record_score
from .kinds import KIND_SQL
from .relatedness import keyword_share, similarities
from .rendering import (
    UNTRUSTED_NOTE,
    fit_budget,
    memory_item,
    omitted_notice,
    render_block,
)

FEEL_MIN_SIMILARITY = 0.65  # docs/COMPANION.md: 相似度 >= 0.65 才算命中
# Keyword fallback: share of the query's terms a feeling must contain (2 of 2, 2 of 3, 3 of 5).
FEEL_KEYWORD_MIN_SHARE = 0.6
FEEL_POOL = 10000


async def feel(service, query: Any, max_tokens: Any) -> dict[str, Any]:
    """Returns ``{"action": "feel", "query", "mode": "vector"|"keyword", "total", "items" (with "relevance"),
    "omitted", "text"}`` plus ``"degraded"`` when it fell back to keywords."""
    runtime = service.runtime
    text = f.checked_query(query)
    budget = f.checked_max_tokens(max_tokens, service.settings.breath_max_tokens)
    feelings = await runtime.records.list_records(
        RecordFilter(
            store_keys=service.scope.readable_store_keys, buckets=("memory",), extra_sql=[f"{KIND_SQL} = 'feel'"]
        ),
        limit=FEEL_POOL,
        order_by="r.created_at DESC, r.rid DESC",
    )
    sims = await similarities(
        runtime, text, [compose_embedding_text(r["title"], r["content"]) for r in feelings], query=True
    )
    if sims.values is not None:
        scored = [(float(s), r) for s, r in zip(sims.values.tolist(), feelings) if s >= FEEL_MIN_SIMILARITY]
    else:
        scored = [
            (share, r)
            for share, r in ((keyword_share(text, f"{r['title']}\n{r['content']}"), r) for r in feelings)
            if share >= FEEL_KEYWORD_MIN_SHARE or text in r["content"]
        ]
    scored.sort(key=lambda pair: -pair[0])
    now = time.time()
    items = []
    for relevance, record in scored:
        item = memory_item(record, record_score(record, service.settings.decay, now))
        item["relevance"] = round(relevance, 4)
        items.append(item)
    kept, omitted = fit_budget(items, budget, render_block)
    if kept:
        rule = f"相似度 ≥ {FEEL_MIN_SIMILARITY}" if sims.values is not None else "关键词字面匹配"
        heading = f"关于「{text}」，我以前留下的感受 {len(kept)} 条（{rule}，逐字原文）"
    else:
        heading = (
            f"没有找到关于「{text}」的感受"
            + (f"（没有相似度 ≥ {FEEL_MIN_SIMILARITY} 的，不拿低相关的凑数）" if sims.values is not None else "")
            if not omitted
            else ""
        )
    sections = [
        f"⚠ 向量检索不可用，本次已退回关键词字面匹配（换个说法的感受可能找不到）：{sims.degraded}"
        if sims.values is None
        else "",
        UNTRUSTED_NOTE,
        heading,
        "\n\n".join(render_block(i) for i in kept),
        omitted_notice(omitted),
    ]
    answer = {
        "action": "feel",
        "query": text,
        "mode": "vector" if sims.values is not None else "keyword",
        "total": len(kept),
        "items": kept,
        "omitted": [i["id"] for i in omitted],
        "text": "\n\n".join(s for s in sections if s),
    }
    if sims.values is None:
        answer["degraded"] = sims.degraded
    return answer
