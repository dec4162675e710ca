-- 0018: the in-memory keyword index also keeps each record's stored vector (``storage.mirrors.stored_vectors``): the
-- passage vector of the text ``embedded_text_hash`` names. The vector drain sets that hash after it indexed a new
-- text, without writing the keyword row, so a change of it is journalled here, by whichever code, connection or
-- process makes it.
CREATE TRIGGER IF NOT EXISTS booku_keyword_journal_vector
AFTER UPDATE OF embedded_text_hash ON booku_memory_records
WHEN OLD.embedded_text_hash IS NOT NEW.embedded_text_hash
BEGIN
    INSERT INTO booku_keyword_journal (rid) VALUES (NEW.rid);
END;
