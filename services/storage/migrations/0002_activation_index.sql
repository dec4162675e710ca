-- 0002: the "active memories" digest and flashback order by recent activation within a store; without this index
-- they sorted the whole store on every refresh.
CREATE INDEX idx_records_activation ON booku_memory_records (store_key, bucket, status, last_activated_at DESC);
