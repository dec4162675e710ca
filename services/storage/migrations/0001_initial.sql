-- 0001: the whole first schema. SQLite is the source of truth; vectors and the FTS index are derived.

CREATE TABLE booku_memory_records (
    rid                 INTEGER PRIMARY KEY,          -- stable rowid shared with the FTS index
    memory_id           TEXT    NOT NULL UNIQUE,      -- mem-<hex> / kb-doc-<hex>-NNNN
    owner_uid           TEXT    NOT NULL DEFAULT 'default',
    store_key           TEXT    NOT NULL DEFAULT 'shared',
    title               TEXT    NOT NULL DEFAULT '',
    name                TEXT    NOT NULL DEFAULT '',  -- bucket name (companion memory), distinct from title
    folder_id           TEXT    NOT NULL DEFAULT 'default',
    bucket              TEXT    NOT NULL DEFAULT 'memory' CHECK (bucket IN ('memory', 'knowledge')),
    content             TEXT    NOT NULL,             -- body only; the title lives in its own column
    source              TEXT    NOT NULL DEFAULT 'agent',
    memory_type         TEXT    NOT NULL DEFAULT 'knowledge',
    status              TEXT    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'expired')),
    person_id           TEXT,
    relation_memory_ids TEXT    NOT NULL DEFAULT '[]',
    relation_aliases    TEXT    NOT NULL DEFAULT '[]',
    event_start_at      REAL    NOT NULL DEFAULT 0,
    event_end_at        REAL    NOT NULL DEFAULT 0,
    related_people      TEXT    NOT NULL DEFAULT '[]',
    knowledge_type      TEXT    NOT NULL DEFAULT '',
    address_or_coord    TEXT    NOT NULL DEFAULT '',
    place_type          TEXT    NOT NULL DEFAULT '',
    asset_type          TEXT    NOT NULL DEFAULT '',
    disposition_status  TEXT    NOT NULL DEFAULT '',
    procedure_type      TEXT    NOT NULL DEFAULT '',
    novelty_energy      REAL    NOT NULL DEFAULT 1.0,
    -- companion-memory fields (used by later features; defaults keep ordinary memories neutral)
    importance          INTEGER NOT NULL DEFAULT 5,
    valence             REAL    NOT NULL DEFAULT 0.5,
    arousal             REAL    NOT NULL DEFAULT 0.3,
    domains             TEXT    NOT NULL DEFAULT '[]',
    pinned              INTEGER NOT NULL DEFAULT 0,
    protected           INTEGER NOT NULL DEFAULT 0,
    anchor              INTEGER NOT NULL DEFAULT 0,
    digested            INTEGER NOT NULL DEFAULT 0,
    resolved            INTEGER NOT NULL DEFAULT 0,
    why_remembered      TEXT    NOT NULL DEFAULT '',
    extra               TEXT    NOT NULL DEFAULT '{}',
    -- knowledge chunks
    document_id         TEXT,
    chunk_index         INTEGER NOT NULL DEFAULT 0,
    -- lifecycle
    version             INTEGER NOT NULL DEFAULT 1,
    is_deleted          INTEGER NOT NULL DEFAULT 0,
    deleted_at          REAL    NOT NULL DEFAULT 0,
    created_at          REAL    NOT NULL,
    updated_at          REAL    NOT NULL,
    last_activated_at   REAL    NOT NULL DEFAULT 0,
    activation_count    INTEGER NOT NULL DEFAULT 0,
    embedded_text_hash  TEXT    NOT NULL DEFAULT ''   -- sha256 of the text whose vector is indexed
);

CREATE INDEX idx_records_store_listing ON booku_memory_records (store_key, bucket, is_deleted, updated_at DESC);
CREATE INDEX idx_records_folder ON booku_memory_records (folder_id, bucket, is_deleted);
CREATE INDEX idx_records_type_status ON booku_memory_records (memory_type, status, last_activated_at);
CREATE INDEX idx_records_person ON booku_memory_records (person_id) WHERE person_id IS NOT NULL;
CREATE INDEX idx_records_document ON booku_memory_records (document_id, chunk_index) WHERE document_id IS NOT NULL;
CREATE INDEX idx_records_created ON booku_memory_records (bucket, created_at);

CREATE TABLE booku_memory_tags (
    memory_id TEXT    NOT NULL,
    tag_type  TEXT    NOT NULL CHECK (tag_type IN ('tag', 'core', 'diffusion', 'opposing')),
    tag_value TEXT    NOT NULL,
    position  INTEGER NOT NULL,
    PRIMARY KEY (memory_id, tag_type, position)
) WITHOUT ROWID;
CREATE INDEX idx_tags_value ON booku_memory_tags (tag_type, tag_value);

-- Full snapshot of a record after every change: the history a user can browse, diff and revert to.
CREATE TABLE booku_memory_revisions (
    revision_id INTEGER PRIMARY KEY,
    memory_id   TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    action      TEXT    NOT NULL,
    snapshot    TEXT    NOT NULL,
    actor       TEXT    NOT NULL DEFAULT 'agent',
    note        TEXT    NOT NULL DEFAULT '',
    created_at  REAL    NOT NULL,
    UNIQUE (memory_id, version)
);

-- Keyword index over jieba-segmented text; rowid = booku_memory_records.rid.
CREATE VIRTUAL TABLE booku_memory_fts USING fts5(title, content, tags, tokenize = 'unicode61 remove_diacritics 2');

CREATE TABLE booku_temporary_memos (
    memo_id    TEXT PRIMARY KEY,
    owner_uid  TEXT NOT NULL DEFAULT 'default',
    stream_id  TEXT NOT NULL DEFAULT '',
    content    TEXT NOT NULL,
    expires_at REAL NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX idx_memos_stream ON booku_temporary_memos (stream_id, expires_at);
CREATE INDEX idx_memos_expiry ON booku_temporary_memos (expires_at);

CREATE TABLE booku_knowledge_documents (
    document_id  TEXT PRIMARY KEY,
    owner_uid    TEXT NOT NULL DEFAULT 'default',
    store_key    TEXT NOT NULL DEFAULT 'shared',
    title        TEXT NOT NULL,
    source       TEXT NOT NULL DEFAULT 'agent',
    source_path  TEXT NOT NULL DEFAULT '',
    content      TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    chunk_count  INTEGER NOT NULL DEFAULT 0,
    version      INTEGER NOT NULL DEFAULT 1,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    UNIQUE (store_key, title, source_path)
);

CREATE TABLE booku_knowledge_document_revisions (
    revision_id  INTEGER PRIMARY KEY,
    document_id  TEXT NOT NULL,
    version      INTEGER NOT NULL,
    action       TEXT NOT NULL,
    title        TEXT NOT NULL,
    content      TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at   REAL NOT NULL
);

-- Pending vector-index work, written in the same transaction as the record change.
CREATE TABLE booku_vector_outbox (
    outbox_id  INTEGER PRIMARY KEY,
    memory_id  TEXT NOT NULL,
    store_key  TEXT NOT NULL DEFAULT 'shared',
    op         TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
    created_at REAL NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_outbox_memory ON booku_vector_outbox (memory_id);

CREATE TABLE booku_embedding_cache (
    model      TEXT NOT NULL,
    mode       TEXT NOT NULL,
    text_hash  TEXT NOT NULL,
    dimension  INTEGER NOT NULL,
    vector     BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, mode, text_hash)
) WITHOUT ROWID;

CREATE TABLE booku_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
