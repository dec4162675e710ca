-- 0004: companion memory (breath / hold / grow / trace / dream / anchor / pulse).
-- The decay score is derived data (recomputed on the maintenance schedule from importance, activity, arousal and
-- resolved state), so it lives in plain columns that are written without a revision. NULL = not scored yet.
ALTER TABLE booku_memory_records ADD COLUMN decay_score REAL;
ALTER TABLE booku_memory_records ADD COLUMN decay_computed_at REAL NOT NULL DEFAULT 0;

-- Default surfacing pre-selects candidates of a store by their stored score.
CREATE INDEX idx_records_decay ON booku_memory_records (store_key, bucket, status, decay_score DESC);
-- Anchors are counted per store on every anchor() call (hard cap 24).
CREATE INDEX idx_records_anchor ON booku_memory_records (store_key, anchor) WHERE anchor = 1;

-- The immutable raw-source layer shared by hold and grow: the text a memory was made from, saved once per store
-- (same text twice = one row), never shown by breath, never updated or deleted.
CREATE TABLE booku_memory_sources (
    source_id      TEXT    PRIMARY KEY,
    owner_uid      TEXT    NOT NULL,
    store_key      TEXT    NOT NULL,
    content        TEXT    NOT NULL,
    content_sha256 TEXT    NOT NULL,
    line_count     INTEGER NOT NULL,
    created_at     REAL    NOT NULL,
    UNIQUE (store_key, content_sha256)
);

-- Which memory came from which source (1-based inclusive line ranges; [] = the whole source) and which memory bucket
-- it digests. One row per memory per write; append-only like the sources themselves.
CREATE TABLE booku_memory_source_links (
    link_id       INTEGER PRIMARY KEY,
    memory_id     TEXT    NOT NULL,
    store_key     TEXT    NOT NULL,
    source_id     TEXT    REFERENCES booku_memory_sources (source_id),
    ranges        TEXT    NOT NULL DEFAULT '[]',
    source_bucket TEXT    NOT NULL DEFAULT '',
    created_at    REAL    NOT NULL
);
CREATE INDEX idx_source_links_memory ON booku_memory_source_links (memory_id, link_id);
CREATE INDEX idx_source_links_bucket ON booku_memory_source_links (source_bucket) WHERE source_bucket != '';

CREATE TRIGGER booku_memory_sources_no_update BEFORE UPDATE ON booku_memory_sources
BEGIN
    SELECT RAISE(ABORT, 'booku_memory_sources is immutable');
END;

CREATE TRIGGER booku_memory_sources_no_delete BEFORE DELETE ON booku_memory_sources
BEGIN
    SELECT RAISE(ABORT, 'booku_memory_sources is immutable');
END;

CREATE TRIGGER booku_memory_source_links_no_update BEFORE UPDATE ON booku_memory_source_links
BEGIN
    SELECT RAISE(ABORT, 'booku_memory_source_links is immutable');
END;

CREATE TRIGGER booku_memory_source_links_no_delete BEFORE DELETE ON booku_memory_source_links
BEGIN
    SELECT RAISE(ABORT, 'booku_memory_source_links is immutable');
END;
