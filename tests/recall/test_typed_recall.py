"""Typed recall: response shape, quotas, budget under adversarial sizes, degrade order, peers."""

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.recall_budget import BudgetEntry, fit_to_budget, render

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
SEED_QUOTAS = {"events": 5, "entities": 5, "preferences": 3, "experiences": 2}


@pytest.fixture
async def service(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        yield memory.get_service(booku_memory.MEMORY_SERVICE)


async def seed(service):
    await service.upsert_memory(
        "用户偏好在 API 文档中同时提供 HTTP、SDK 和 CLI 示例。", title="API 文档偏好", memory_type="preference"
    )
    await service.upsert_memory("上周五用户发布了 API 文档的第一版。", title="发布 API 文档", memory_type="event")
    await service.upsert_memory(
        "张三负责维护 API 文档的 SDK 示例。", title="张三", memory_type="person", person_id="qq:1"
    )
    await service.upsert_memory(
        "李四审阅了 API 文档的 CLI 部分。", title="李四", memory_type="person", person_id="qq:2"
    )
    await service.upsert_memory(
        "写 API 文档时先给出最小可运行示例效果最好。", title="文档经验", memory_type="experience"
    )


async def test_response_has_the_seed_shape_field_by_field(service):
    await seed(service)
    result = await service.recall("API 文档偏好", quotas=SEED_QUOTAS, max_chars=6500, peer_scope="all", min_score=0.0)
    assert set(result) == {"entries", "rendered", "stats"}
    stats = result["stats"]
    assert set(stats) >= {
        "quotas",
        "roots",
        "searched",
        "returned",
        "dropped",
        "max_chars",
        "min_score",
        "peer_scope",
        "other_peer_penalties",
        "origins",
    }
    assert stats["quotas"] == SEED_QUOTAS and stats["max_chars"] == 6500 and stats["peer_scope"] == "all"
    assert set(stats["searched"]) == set(SEED_QUOTAS)
    assert stats["other_peer_penalties"] == {"events": 0.1, "entities": 0.1, "preferences": 0.02, "experiences": 0.02}
    assert set(stats["origins"]) == {"actor_peer", "self", "other_peer"}
    assert stats["returned"] == len(result["entries"]) == sum(stats["origins"].values())
    assert stats["roots"] == ["booku://shared/memories"]
    for entry in result["entries"]:
        assert {"uri", "score", "type", "mode", "rank", "origin", "abstract"} <= set(entry)
        assert entry["type"] in SEED_QUOTAS and entry["mode"] == "full" and entry["content"]
        assert entry["uri"].startswith("booku://shared/memories/" + entry["type"] + "/")
    ranks = {}
    for entry in result["entries"]:
        ranks.setdefault(entry["type"], []).append(entry["rank"])
    assert all(r == list(range(1, len(r) + 1)) for r in ranks.values())
    assert "### Preferences" in result["rendered"] and "(score=" in result["rendered"]


async def test_default_quotas_leave_experiences_out(service):
    await seed(service)
    result = await service.recall("API 文档", min_score=0.0)
    assert result["stats"]["quotas"] == {"events": 10, "entities": 10, "preferences": 3, "experiences": 0}
    assert all(e["type"] != "experiences" for e in result["entries"])


async def test_quota_of_zero_and_unknown_category(service):
    await seed(service)
    result = await service.recall("API 文档", quotas={"events": 0, "preferences": 1}, min_score=0.0)
    assert [e["type"] for e in result["entries"]] == ["preferences"]
    assert result["stats"]["searched"]["events"] == 0
    with pytest.raises(ValidationError, match="quotas"):
        await service.recall("API 文档", quotas={"memes": 3})
    with pytest.raises(ValidationError, match="quotas.events"):
        await service.recall("API 文档", quotas={"events": -1})


async def test_render_false_gives_an_empty_block_and_full_entries(service):
    await seed(service)
    result = await service.recall("API 文档", render=False, min_score=0.0)
    assert result["rendered"] == "" and result["entries"]
    assert all(e["mode"] == "full" for e in result["entries"])


async def test_one_huge_memory_never_blows_the_budget(service):
    await service.upsert_memory("API 文档" + "很长的细节描述。" * 2400, title="巨大的文档记忆", memory_type="event")
    await service.upsert_memory("API 文档的小贴士", title="小贴士", memory_type="event")
    result = await service.recall("API 文档", max_chars=800, min_score=0.0)
    assert 0 < len(result["rendered"]) <= 800
    modes = {e["abstract"]: e["mode"] for e in result["entries"]}
    assert modes["巨大的文档记忆"] in ("summary", "uri")


def entry(i, score, content):
    return BudgetEntry(
        uri=f"booku://s/memories/events/m{i}",
        score=score,
        category="events",
        origin="self",
        content=content,
        summary=content[:10] + "…",
        rank=i,
    )


def test_thousands_of_tiny_entries_fit_and_the_best_survive():
    entries = [entry(i, 1.0 - i / 5000, f"第{i}条很小的记忆，内容很短但数量很多。") for i in range(1, 3001)]
    rendered, dropped = fit_to_budget(entries, 6500)
    assert len(rendered) <= 6500 and dropped > 0
    kept = [e for e in entries if e.mode != "dropped"]
    assert kept[0].rank == 1 and max(e.rank for e in kept) < min(e.rank for e in entries if e.mode == "dropped")
    assert rendered == render(entries)


def test_degrade_order_is_summary_then_uri_then_drop_from_the_least_relevant():
    entries = [entry(i, 1.0 - i / 10, "很长的正文" * 40) for i in range(1, 5)]
    full = len(render(entries))
    fit_to_budget(entries, full - 150)
    assert [e.mode for e in entries] == ["full", "full", "full", "summary"]
    entries = [entry(i, 1.0 - i / 10, "很长的正文" * 40) for i in range(1, 5)]
    budget = len(render([*entries[:1]])) + 3 * 50
    fit_to_budget(entries, budget)
    order = ["full", "summary", "uri", "dropped"]
    positions = [order.index(e.mode) for e in entries]
    assert positions == sorted(positions), [e.mode for e in entries]
    assert len(render(entries)) <= budget


def test_a_budget_smaller_than_anything_gives_an_empty_block():
    entries = [entry(1, 0.9, "内容")]
    rendered, dropped = fit_to_budget(entries, 5)
    assert rendered == "" and dropped == 1


async def test_other_peers_are_penalised_and_actor_scope_keeps_only_the_speaker(service):
    await seed(service)
    everyone = await service.recall("API 文档", quotas={"entities": 10}, min_score=-5.0, actor_peer_id="qq:1")
    origins = {e["abstract"]: e["origin"] for e in everyone["entries"]}
    assert origins["张三"] == "actor_peer" and origins["李四"] == "other_peer"
    unpenalised = await service.recall(
        "API 文档", quotas={"entities": 10}, min_score=-5.0, actor_peer_id="qq:1", other_peer_penalty=0.0
    )
    score = lambda r, name: next(e["score"] for e in r["entries"] if e["abstract"] == name)
    assert score(everyone, "李四") == pytest.approx(score(unpenalised, "李四") - 0.1, abs=1e-3)
    assert score(everyone, "张三") == pytest.approx(score(unpenalised, "张三"), abs=1e-3)
    actor = await service.recall(
        "API 文档", quotas={"entities": 10}, min_score=-5.0, peer_scope="actor", actor_peer_id="qq:1"
    )
    assert [e["abstract"] for e in actor["entries"]] == ["张三"]
    with pytest.raises(ValidationError, match="actor"):
        await service.recall("API 文档", peer_scope="actor")


async def test_min_score_filters(service):
    await seed(service)
    assert (await service.recall("API 文档", min_score=10.0))["entries"] == []
