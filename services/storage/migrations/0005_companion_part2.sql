-- 0005: companion memory part 2 (letters with locks; dream witnesses of self-knowledge candidates).
--
-- Letters live in their own table, not in booku_memory_records: a locked letter's body must not reach anyone who may
-- not read it, and records are read by many paths (memory search, dashboard lists, history snapshots, audit
-- before/after). Here the body is only ever returned by the letter service, which applies the lock. A letter is kept
-- forever: it cannot be deleted, and the only columns that may change are the lock columns. A permanent lock is
-- final. Lock changes are written to booku_audit_log as events without title or body
-- (services/companion/letter_store.py).
CREATE TABLE booku_companion_letters (
    letter_id       TEXT    PRIMARY KEY,                 -- 12 hex characters, shown as [a0102c0f44e2]
    owner_uid       TEXT    NOT NULL,
    store_key       TEXT    NOT NULL,
    side            TEXT    NOT NULL CHECK (side IN ('user', 'ai')),         -- interface that wrote it (trusted)
    author          TEXT    NOT NULL,                    -- signature as stored: 'user', the AI's name, or any string
    author_side     TEXT    NOT NULL CHECK (author_side IN ('user', 'ai')),  -- whose words the signature claims
    user_name       TEXT    NOT NULL DEFAULT '',
    ai_name         TEXT    NOT NULL DEFAULT '',
    title           TEXT    NOT NULL DEFAULT '',
    letter_date     TEXT    NOT NULL DEFAULT '',         -- the date the writer gave, as given ('' = none)
    written_at      REAL    NOT NULL,                    -- that date as a timestamp, else created_at
    content         TEXT    NOT NULL,
    content_sha256  TEXT    NOT NULL,
    lock_type       TEXT    NOT NULL DEFAULT 'none' CHECK (lock_type IN ('none', 'timed', 'permanent')),
    unlock_at       REAL,                                -- only for timed locks
    unlock_date     TEXT    NOT NULL DEFAULT '',         -- the unlock date as given
    created_at      REAL    NOT NULL,
    lock_changed_at REAL    NOT NULL DEFAULT 0,
    CHECK ((lock_type = 'timed') = (unlock_at IS NOT NULL))
);
CREATE INDEX idx_letters_store_written ON booku_companion_letters (store_key, written_at DESC, created_at DESC);

CREATE TRIGGER booku_companion_letters_no_delete BEFORE DELETE ON booku_companion_letters
BEGIN
    SELECT RAISE(ABORT, 'booku_companion_letters: letters are kept forever');
END;

CREATE TRIGGER booku_companion_letters_lock_only BEFORE UPDATE ON booku_companion_letters
WHEN NEW.letter_id IS NOT OLD.letter_id OR NEW.owner_uid IS NOT OLD.owner_uid OR NEW.store_key IS NOT OLD.store_key
    OR NEW.side IS NOT OLD.side OR NEW.author IS NOT OLD.author OR NEW.author_side IS NOT OLD.author_side
    OR NEW.user_name IS NOT OLD.user_name OR NEW.ai_name IS NOT OLD.ai_name OR NEW.title IS NOT OLD.title
    OR NEW.letter_date IS NOT OLD.letter_date OR NEW.written_at IS NOT OLD.written_at
    OR NEW.content IS NOT OLD.content OR NEW.content_sha256 IS NOT OLD.content_sha256
    OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'booku_companion_letters: only the lock of a letter may change');
END;

CREATE TRIGGER booku_companion_letters_permanent_is_final BEFORE UPDATE ON booku_companion_letters
WHEN OLD.lock_type = 'permanent'
BEGIN
    SELECT RAISE(ABORT, 'booku_companion_letters: a permanent lock is final');
END;

-- One row per (self-knowledge candidate, local date) on which a dream showed it. promote needs 3 different dates.
-- Append-only: a witness cannot be taken back.
CREATE TABLE booku_companion_self_witnesses (
    memory_id    TEXT NOT NULL,
    store_key    TEXT NOT NULL,
    witness_date TEXT NOT NULL,                          -- local YYYY-MM-DD of the dream
    witnessed_at REAL NOT NULL,                          -- first dream of that date
    PRIMARY KEY (memory_id, witness_date)
);

CREATE TRIGGER booku_companion_self_witnesses_no_update BEFORE UPDATE ON booku_companion_self_witnesses
BEGIN
    SELECT RAISE(ABORT, 'booku_companion_self_witnesses is append-only');
END;

CREATE TRIGGER booku_companion_self_witnesses_no_delete BEFORE DELETE ON booku_companion_self_witnesses
BEGIN
    SELECT RAISE(ABORT, 'booku_companion_self_witnesses is append-only');
END;
