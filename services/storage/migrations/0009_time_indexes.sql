-- 0009: indexes for the time route of retrieval ("我昨天说了什么", "what did I say on 2023-05-07").
--
-- A query naming a day reads the memories of that day in the caller's stores: by creation time for ordinary
-- memories, by event window for memories that carry one. Without these, that read scanned every row of the store.
-- The event index is partial: most memories have no event time (event_start_at = 0).

CREATE INDEX idx_records_store_created ON booku_memory_records (store_key, created_at);
CREATE INDEX idx_records_store_event ON booku_memory_records (store_key, event_start_at) WHERE event_start_at > 0;
