-- 0012: the in-memory keyword index also keeps each row's record state (bucket, status, deletion flag) to filter
-- its hits without SQL (``storage.record_states``). Those columns change without the keyword row being written
-- (archive, soft delete, restore, expiry), so a change of any of them is journalled here, by whichever code,
-- connection or process makes it; a deleted record likewise. Rows are re-read when applied, so an entry that the
-- keyword row's own write also journalled costs nothing but its re-read.
CREATE TRIGGER IF NOT EXISTS booku_keyword_journal_state
AFTER UPDATE OF bucket, status, is_deleted ON booku_memory_records
WHEN OLD.bucket IS NOT NEW.bucket OR OLD.status IS NOT NEW.status OR OLD.is_deleted IS NOT NEW.is_deleted
BEGIN
    INSERT INTO booku_keyword_journal (rid) VALUES (NEW.rid);
END;

CREATE TRIGGER IF NOT EXISTS booku_keyword_journal_record_deleted
AFTER DELETE ON booku_memory_records
BEGIN
    INSERT INTO booku_keyword_journal (rid) VALUES (OLD.rid);
END;
