-- 0006: chat evidence and dreaming (services/evidence/).
--
-- Chat messages the host passed to the plugin are kept as immutable evidence, scoped by store like memories. The only
-- change a row may ever see is the retraction that removes its bytes (retracted by a person, or expired by the
-- retention policy); a trigger enforces that. Episodes (dreaming stage A) are a navigation index over those messages;
-- proposals (dreaming stage B) are pending memories with their evidence, decided once by a human. Every step is also
-- written to booku_audit_log (actions chat_*, episode_*, proposal_*, review_flag_*), without message text, so that a
-- retraction really removes the bytes.

CREATE TABLE booku_chat_messages (
    seq          INTEGER PRIMARY KEY,               -- arrival order; rowid of booku_chat_fts
    entry_id     TEXT    NOT NULL UNIQUE,           -- chat-<hex>: the id evidence is cited by
    message_id   TEXT    NOT NULL,                  -- the host's message id
    stream_id    TEXT    NOT NULL,                  -- the host's chat stream (the channel)
    store_key    TEXT    NOT NULL,
    owner_uid    TEXT    NOT NULL,
    platform     TEXT    NOT NULL DEFAULT '',
    chat_type    TEXT    NOT NULL DEFAULT '',
    direction    TEXT    NOT NULL CHECK (direction IN ('received', 'sent')),
    sender_id    TEXT    NOT NULL DEFAULT '',
    sender_name  TEXT    NOT NULL DEFAULT '',
    sent_at      REAL    NOT NULL,
    recorded_at  REAL    NOT NULL,
    text         TEXT    NOT NULL,
    text_sha256  TEXT    NOT NULL,
    retracted_at REAL    NOT NULL DEFAULT 0,
    retraction   TEXT    NOT NULL DEFAULT '' CHECK (retraction IN ('', 'retracted', 'expired')),
    UNIQUE (stream_id, message_id)
);
CREATE INDEX idx_chat_channel_time ON booku_chat_messages (store_key, stream_id, sent_at);
CREATE INDEX idx_chat_store_time ON booku_chat_messages (store_key, sent_at);
CREATE INDEX idx_chat_live_time ON booku_chat_messages (sent_at) WHERE retracted_at = 0;

CREATE TRIGGER booku_chat_messages_no_delete BEFORE DELETE ON booku_chat_messages
BEGIN
    SELECT RAISE(ABORT, 'booku_chat_messages is immutable: retract a message instead of deleting it');
END;

CREATE TRIGGER booku_chat_messages_only_retraction BEFORE UPDATE ON booku_chat_messages
WHEN NOT (
    OLD.retracted_at = 0 AND NEW.retracted_at > 0 AND NEW.retraction IN ('retracted', 'expired')
    AND NEW.text = '' AND NEW.text_sha256 = ''
    AND NEW.seq = OLD.seq AND NEW.entry_id = OLD.entry_id AND NEW.message_id = OLD.message_id
    AND NEW.stream_id = OLD.stream_id AND NEW.store_key = OLD.store_key AND NEW.owner_uid = OLD.owner_uid
    AND NEW.platform = OLD.platform AND NEW.chat_type = OLD.chat_type AND NEW.direction = OLD.direction
    AND NEW.sender_id = OLD.sender_id AND NEW.sender_name = OLD.sender_name AND NEW.sent_at = OLD.sent_at
    AND NEW.recorded_at = OLD.recorded_at
)
BEGIN
    SELECT RAISE(ABORT, 'booku_chat_messages is immutable: the only allowed change is a retraction that removes the text');
END;

-- Keyword index over jieba-segmented message text; rowid = booku_chat_messages.seq. Retraction deletes the row.
CREATE VIRTUAL TABLE booku_chat_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');

-- Dreaming stage A: one summary per window of one channel's messages.
CREATE TABLE booku_episodes (
    seq           INTEGER PRIMARY KEY,              -- rowid of booku_episode_fts; stage B's high-water mark
    episode_id    TEXT    NOT NULL UNIQUE,          -- epi-<hex>
    store_key     TEXT    NOT NULL,
    owner_uid     TEXT    NOT NULL,
    stream_id     TEXT    NOT NULL,
    topic         TEXT    NOT NULL,
    summary       TEXT    NOT NULL,
    start_at      REAL    NOT NULL,
    end_at        REAL    NOT NULL,
    message_count INTEGER NOT NULL,
    model_id      TEXT    NOT NULL DEFAULT '',
    batch_id      TEXT    NOT NULL DEFAULT '',
    created_at    REAL    NOT NULL
);
CREATE INDEX idx_episodes_owner_seq ON booku_episodes (store_key, owner_uid, seq);
CREATE INDEX idx_episodes_channel_time ON booku_episodes (store_key, stream_id, start_at);

-- Which messages an episode covers. A message covered by an episode is "processed" for stage A.
CREATE TABLE booku_episode_messages (
    episode_id TEXT NOT NULL REFERENCES booku_episodes (episode_id) ON DELETE CASCADE,
    entry_id   TEXT NOT NULL,
    PRIMARY KEY (episode_id, entry_id)
) WITHOUT ROWID;
CREATE INDEX idx_episode_messages_entry ON booku_episode_messages (entry_id);

CREATE VIRTUAL TABLE booku_episode_fts USING fts5(topic, summary, tokenize = 'unicode61 remove_diacritics 2');

-- Dreaming stage B: proposed new or changed memories. Never facts: a human approves (-> a memory) or rejects them.
CREATE TABLE booku_dream_proposals (
    seq              INTEGER PRIMARY KEY,
    proposal_id      TEXT    NOT NULL UNIQUE,       -- prop-<hex>
    store_key        TEXT    NOT NULL,
    owner_uid        TEXT    NOT NULL,
    kind             TEXT    NOT NULL CHECK (kind IN ('create', 'update')),
    target_memory_id TEXT,                           -- the memory an 'update' proposal changes
    fields           TEXT    NOT NULL,               -- JSON: title, content, memory_type, tag groups
    reason           TEXT    NOT NULL DEFAULT '',    -- the model's justification
    content_sha256   TEXT    NOT NULL,               -- duplicate check (a rejected idea is not proposed again)
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'approved', 'rejected', 'withdrawn')),
    authority        TEXT    NOT NULL DEFAULT 'dreaming' CHECK (authority = 'dreaming'),
    batch_id         TEXT    NOT NULL,
    model_id         TEXT    NOT NULL DEFAULT '',
    created_at       REAL    NOT NULL,
    reviewed_at      REAL    NOT NULL DEFAULT 0,
    reviewer         TEXT    NOT NULL DEFAULT '',
    review_reason    TEXT    NOT NULL DEFAULT '',
    final_fields     TEXT,                           -- JSON: what the human approved (after edits)
    memory_id        TEXT,                           -- the memory the approval wrote
    redacted_at      REAL    NOT NULL DEFAULT 0      -- text removed because its only sources were retracted
);
CREATE INDEX idx_proposals_queue ON booku_dream_proposals (store_key, status, seq);
CREATE INDEX idx_proposals_duplicates ON booku_dream_proposals (store_key, content_sha256);
CREATE INDEX idx_proposals_batch ON booku_dream_proposals (batch_id);

-- A proposal is decided once (pending -> approved | rejected | withdrawn); afterwards only its text may be redacted.
CREATE TRIGGER booku_dream_proposals_decided_once BEFORE UPDATE ON booku_dream_proposals
WHEN NOT (
    (
        (OLD.status = 'pending' AND NEW.status IN ('approved', 'rejected', 'withdrawn'))
        OR (OLD.status = NEW.status AND OLD.redacted_at = 0 AND NEW.redacted_at > 0 AND NEW.fields = '{}'
            AND NEW.reason = '' AND NEW.final_fields IS NULL)
    )
    AND NEW.seq = OLD.seq AND NEW.proposal_id = OLD.proposal_id AND NEW.store_key = OLD.store_key
    AND NEW.owner_uid = OLD.owner_uid AND NEW.kind = OLD.kind AND NEW.batch_id = OLD.batch_id
    AND NEW.created_at = OLD.created_at AND NEW.content_sha256 = OLD.content_sha256
)
BEGIN
    SELECT RAISE(ABORT, 'a proposal is decided once: pending -> approved | rejected | withdrawn');
END;

CREATE TRIGGER booku_dream_proposals_no_delete BEFORE DELETE ON booku_dream_proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are kept: withdraw or redact them instead');
END;

-- Evidence of a proposal: messages cited directly, episodes cited, and the messages those episodes covered.
CREATE TABLE booku_proposal_evidence (
    proposal_id TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('message', 'episode', 'episode_message')),
    ref_id      TEXT NOT NULL,
    via         TEXT NOT NULL DEFAULT '',           -- the episode an 'episode_message' came through
    PRIMARY KEY (proposal_id, kind, ref_id, via)
) WITHOUT ROWID;
CREATE INDEX idx_proposal_evidence_ref ON booku_proposal_evidence (ref_id);

-- Stage B's two high-water marks per owner and store, committed with the proposals of the run that moved them.
CREATE TABLE booku_dreaming_marks (
    store_key   TEXT    NOT NULL,
    owner_uid   TEXT    NOT NULL,
    episode_seq INTEGER NOT NULL DEFAULT 0,
    message_seq INTEGER NOT NULL DEFAULT 0,
    runs        INTEGER NOT NULL DEFAULT 0,
    updated_at  REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (store_key, owner_uid)
) WITHOUT ROWID;

-- Which approved proposal a memory came from (a merge can add several).
CREATE TABLE booku_memory_provenance (
    memory_id   TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    store_key   TEXT NOT NULL,
    approved_at REAL NOT NULL,
    approved_by TEXT NOT NULL,
    PRIMARY KEY (memory_id, proposal_id)
) WITHOUT ROWID;
CREATE INDEX idx_provenance_proposal ON booku_memory_provenance (proposal_id);

-- Approved memories whose evidence was retracted wait here for a human to keep or delete them.
CREATE TABLE booku_review_flags (
    flag_id     INTEGER PRIMARY KEY,
    memory_id   TEXT NOT NULL,
    store_key   TEXT NOT NULL,
    proposal_id TEXT NOT NULL DEFAULT '',
    entry_id    TEXT NOT NULL DEFAULT '',
    reason      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    resolved_at REAL NOT NULL DEFAULT 0,
    resolution  TEXT NOT NULL DEFAULT '' CHECK (resolution IN ('', 'kept', 'deleted')),
    resolved_by TEXT NOT NULL DEFAULT '',
    note        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_review_flags_open ON booku_review_flags (store_key, resolved_at, flag_id);
CREATE INDEX idx_review_flags_memory ON booku_review_flags (memory_id);

-- Pending vector work for the 'chat' and 'episode' tiers, written in the same transaction as the row it concerns.
CREATE TABLE booku_evidence_vector_outbox (
    outbox_id  INTEGER PRIMARY KEY,
    tier       TEXT    NOT NULL CHECK (tier IN ('chat', 'episode')),
    item_id    TEXT    NOT NULL,
    store_key  TEXT    NOT NULL,
    op         TEXT    NOT NULL CHECK (op IN ('upsert', 'delete')),
    created_at REAL    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT    NOT NULL DEFAULT ''
);
