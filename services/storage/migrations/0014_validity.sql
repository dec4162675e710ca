-- 0014: validity in time. A memory states a fact that became true at ``valid_from`` (its event time, else its
-- write time) and, once a later memory replaced it, carries ``superseded_at`` and ``superseded_by`` (the newer
-- memory's id). The reverse link ("supersedes") is not stored: it is the set of rows whose superseded_by names a
-- memory, read through the index below, so the two directions can never disagree.
ALTER TABLE booku_memory_records ADD COLUMN valid_from REAL NOT NULL DEFAULT 0;
ALTER TABLE booku_memory_records ADD COLUMN superseded_at REAL NOT NULL DEFAULT 0;
ALTER TABLE booku_memory_records ADD COLUMN superseded_by TEXT NOT NULL DEFAULT '';
UPDATE booku_memory_records
SET valid_from = CASE WHEN event_start_at > 0 THEN event_start_at ELSE created_at END;
CREATE INDEX IF NOT EXISTS idx_records_superseded_by ON booku_memory_records (superseded_by)
WHERE superseded_by != '';
-- Ranking reads superseded_by from the in-memory candidate rows (``storage.candidate_rows``); a change journals the
-- row like the columns of 0013.
CREATE TRIGGER IF NOT EXISTS booku_keyword_journal_validity
AFTER UPDATE OF superseded_by ON booku_memory_records
WHEN OLD.superseded_by IS NOT NEW.superseded_by
BEGIN
    INSERT INTO booku_keyword_journal (rid) VALUES (NEW.rid);
END;
