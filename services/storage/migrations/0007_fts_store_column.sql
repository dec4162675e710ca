-- 0007: the keyword index carries each record's store as one opaque token (column ``store``), so a scoped keyword
-- search limits the store inside FTS5 instead of ranking every store's rows first and filtering afterwards (which
-- lost recall with many owners). FTS rows are derived data: the table is recreated empty here, and the runtime
-- refills it with jieba segmentation at the next start because the flag below is set (then clears the flag).
DROP TABLE IF EXISTS booku_memory_fts;

CREATE VIRTUAL TABLE booku_memory_fts USING fts5(title, content, tags, store, tokenize = 'unicode61 remove_diacritics 2');

INSERT INTO booku_meta (key, value) VALUES ('keyword_index_rebuild', '1')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
