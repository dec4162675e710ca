-- 0013: the in-memory keyword index also keeps the columns ranking reads of each record (``storage.candidate_rows``).
-- A change of the record's text, tags or store rewrites its keyword row, which journals it, and 0012 journals a
-- change of bucket, status or deletion flag; this trigger journals a change of any other column held there, by
-- whichever code, connection or process makes it.
CREATE TRIGGER IF NOT EXISTS booku_keyword_journal_candidate
AFTER UPDATE OF store_key, memory_type, folder_id, person_id, relation_memory_ids, created_at, event_start_at,
    event_end_at, content ON booku_memory_records
WHEN OLD.store_key IS NOT NEW.store_key OR OLD.memory_type IS NOT NEW.memory_type
    OR OLD.folder_id IS NOT NEW.folder_id OR OLD.person_id IS NOT NEW.person_id
    OR OLD.relation_memory_ids IS NOT NEW.relation_memory_ids OR OLD.created_at IS NOT NEW.created_at
    OR OLD.event_start_at IS NOT NEW.event_start_at OR OLD.event_end_at IS NOT NEW.event_end_at
    OR OLD.content IS NOT NEW.content
BEGIN
    INSERT INTO booku_keyword_journal (rid) VALUES (NEW.rid);
END;
