-- 0020: a memory's stored fact cues (0019) go when its content changes, by whichever code, connection or process
-- changes it: no reading of a text the memory no longer holds stays behind (the next write near it reads the new text).
CREATE TRIGGER IF NOT EXISTS booku_fact_cues_content
AFTER UPDATE OF content ON booku_memory_records
WHEN OLD.content IS NOT NEW.content
BEGIN
    DELETE FROM booku_fact_cues WHERE memory_id = NEW.memory_id;
END;
