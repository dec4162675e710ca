"""The shapes of the record rows that travel from storage through retrieval, fusion and rendering.

Why: both are plain dicts (SQLite rows decoded by ``records.row_to_record`` and ``record_columns.decode_candidate``,
or the in-memory copy of ``candidate_rows``), built in one place and read in many; naming their keys and types
lets the type checker follow a row from the query that read it to the item a client receives.
"""

from typing import Any, NotRequired, TypedDict


class CandidateRow(TypedDict):
    """What ranking reads of a live candidate (``record_columns.CANDIDATE_KEYS``): filters, partition, person, write
    order, time, text shape and the head of its text; the four tag lists only when asked for."""

    memory_id: str
    rid: int
    store_key: str
    bucket: str
    status: str
    memory_type: str
    folder_id: str
    person_id: str | None
    relation_memory_ids: list[str]
    created_at: float
    event_start_at: float
    event_end_at: float
    superseded_by: str
    question_share: float | None  # None when the text does not end with a question
    content_chars: int
    content_head: str | None
    tags: NotRequired[list[str]]
    core_tags: NotRequired[list[str]]
    diffusion_tags: NotRequired[list[str]]
    opposing_tags: NotRequired[list[str]]


class RecordRow(TypedDict):
    """A whole record as ``RecordRepository.get_many`` returns it: every column of ``booku_memory_records``, the JSON
    columns decoded, the flags as booleans, and its tags by group."""

    rid: int
    memory_id: str
    owner_uid: str
    store_key: str
    title: str
    name: str
    folder_id: str
    bucket: str
    content: str
    source: str
    memory_type: str
    status: str
    person_id: str | None
    relation_memory_ids: list[str]
    relation_aliases: list[str]
    event_start_at: float
    event_end_at: float
    related_people: list[str]
    knowledge_type: str
    address_or_coord: str
    place_type: str
    asset_type: str
    disposition_status: str
    procedure_type: str
    novelty_energy: float
    importance: int
    valence: float
    arousal: float
    domains: list[str]
    pinned: bool
    protected: bool
    anchor: bool
    digested: bool
    resolved: bool
    why_remembered: str
    extra: dict[str, Any]
    document_id: str | None
    chunk_index: int
    version: int
    is_deleted: bool
    deleted_at: float
    created_at: float
    updated_at: float
    last_activated_at: float
    activation_count: int
    embedded_text_hash: str
    authority: str
    author: str
    decay_score: float | None
    decay_computed_at: float
    valid_from: float
    superseded_at: float
    superseded_by: str
    time_zone: str
    tags: list[str]
    core_tags: list[str]
    diffusion_tags: list[str]
    opposing_tags: list[str]
