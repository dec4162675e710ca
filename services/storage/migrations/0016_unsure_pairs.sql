-- 0016: pairs of memories whose relation the local decision (``logic.supersession``) was unsure of: the newer may
-- update the older ("maybe_update") or restate it ("maybe_duplicate"). A model (``dreaming`` authority) or a human
-- decides each once: accepted (the supersession or the lossless merge was applied) or dismissed (the two are
-- distinct facts). The row stays after the decision, so a decided pair is never asked again.
CREATE TABLE IF NOT EXISTS booku_unsure_pairs (
    seq            INTEGER PRIMARY KEY,
    pair_id        TEXT    NOT NULL UNIQUE,          -- pair-<hex>
    store_key      TEXT    NOT NULL,
    owner_uid      TEXT    NOT NULL,
    kind           TEXT    NOT NULL CHECK (kind IN ('maybe_update', 'maybe_duplicate')),
    new_memory_id  TEXT    NOT NULL,
    old_memory_id  TEXT    NOT NULL,
    status         TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'dismissed')),
    model_id       TEXT    NOT NULL DEFAULT '',      -- the model asked, if any
    model_answer   TEXT    NOT NULL DEFAULT '',      -- ADD | UPDATE | DUPLICATE, when a model answered
    decided_by     TEXT    NOT NULL DEFAULT '',      -- authority of the decision: human | dreaming
    decided_at     REAL    NOT NULL DEFAULT 0,
    created_at     REAL    NOT NULL,
    UNIQUE (old_memory_id, new_memory_id)
);
CREATE INDEX IF NOT EXISTS idx_unsure_pairs_queue ON booku_unsure_pairs (store_key, status, seq);
