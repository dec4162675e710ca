-- 0003: write authority on records and revisions, and the append-only audit log.
ALTER TABLE booku_memory_records ADD COLUMN authority TEXT NOT NULL DEFAULT 'agent';
ALTER TABLE booku_memory_records ADD COLUMN author TEXT NOT NULL DEFAULT '';
ALTER TABLE booku_memory_revisions ADD COLUMN authority TEXT NOT NULL DEFAULT 'agent';

-- One row per changed record per change, written in the same transaction as the change. Never updated or deleted.
CREATE TABLE booku_audit_log (
    audit_id   INTEGER PRIMARY KEY,
    at         REAL NOT NULL,
    authority  TEXT NOT NULL CHECK (authority IN ('human', 'agent', 'dreaming', 'source_learning', 'mechanical')),
    actor      TEXT NOT NULL,
    cause      TEXT NOT NULL DEFAULT '',
    batch_id   TEXT NOT NULL DEFAULT '',
    action     TEXT NOT NULL,
    memory_id  TEXT NOT NULL,
    owner_uid  TEXT NOT NULL,
    store_key  TEXT NOT NULL,
    version    INTEGER NOT NULL DEFAULT 0,
    before     TEXT,
    after      TEXT
);
CREATE INDEX idx_audit_store_time ON booku_audit_log (store_key, at DESC);
CREATE INDEX idx_audit_memory ON booku_audit_log (memory_id, audit_id);
CREATE INDEX idx_audit_batch ON booku_audit_log (batch_id) WHERE batch_id != '';

CREATE TRIGGER booku_audit_log_no_update BEFORE UPDATE ON booku_audit_log
BEGIN
    SELECT RAISE(ABORT, 'booku_audit_log is append-only');
END;

CREATE TRIGGER booku_audit_log_no_delete BEFORE DELETE ON booku_audit_log
BEGIN
    SELECT RAISE(ABORT, 'booku_audit_log is append-only');
END;
