-- 0017: a title on many memories of a store stops framing their vectors (``storage.shared_titles``). Writes count a
-- title's rows in its store; this index finds them without reading the store.
CREATE INDEX IF NOT EXISTS idx_records_store_title ON booku_memory_records (store_key, title);
-- Vectors embedded before the rule still carry their shared title: queue them, the drain re-frames them (texts that
-- come out unchanged are answered from the embedding cache). 10 is ``logic.text.SHARED_TITLE_MIN``.
INSERT INTO booku_vector_outbox (memory_id, store_key, op, created_at)
SELECT r.memory_id, r.store_key, 'upsert', strftime('%s', 'now')
FROM booku_memory_records r
JOIN (
    SELECT store_key, title FROM booku_memory_records GROUP BY store_key, title HAVING COUNT(*) >= 10
) shared ON shared.store_key = r.store_key AND shared.title = r.title
WHERE r.is_deleted = 0;
