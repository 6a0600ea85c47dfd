-- Labels (PostgreSQL). Keep in step with ../sqlite/0001_labels.sql: the two differ only in
-- how the history's id is generated.

-- The current set of each annotator on each unit.
CREATE TABLE label_sets (
    session_id   TEXT   NOT NULL,
    event_id     TEXT   NOT NULL,
    annotator    TEXT   NOT NULL,
    status       TEXT   NOT NULL,
    labels       TEXT   NOT NULL, -- JSON array of label records
    note         TEXT,
    lead_time_ms BIGINT,
    version      BIGINT NOT NULL,
    updated_at   TEXT   NOT NULL, -- RFC 3339, UTC, milliseconds
    PRIMARY KEY (session_id, event_id, annotator)
);

-- Every change, append-only.
CREATE TABLE label_history (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    annotator  TEXT   NOT NULL,
    version    BIGINT NOT NULL, -- the set's version after a put, the removed one for a delete
    action     TEXT   NOT NULL, -- 'put' | 'delete'
    actor      TEXT   NOT NULL, -- who made the change
    at         TEXT   NOT NULL, -- RFC 3339, UTC, milliseconds
    before_set TEXT,            -- JSON of the set before (NULL: there was none)
    after_set  TEXT             -- JSON of the set after (NULL: removed)
);

CREATE INDEX label_history_unit ON label_history (session_id, event_id, annotator, version);
