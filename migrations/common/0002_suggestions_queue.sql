-- Suggestions, queue reservations, and the indexes the agreement, progress and export
-- reads use. The same in SQLite and PostgreSQL.

-- A model's suggested labels on a unit, one row per model (never counted in agreement).
CREATE TABLE label_suggestions (
    session_id TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    model      TEXT   NOT NULL,
    score      DOUBLE PRECISION,
    labels     TEXT   NOT NULL, -- JSON array of label records
    updated_at TEXT   NOT NULL, -- RFC 3339, UTC, milliseconds
    PRIMARY KEY (session_id, event_id, model)
);

-- A unit handed out by the queue to an annotator, until it expires (Unix milliseconds),
-- the annotator submits or discards it, or releases it.
CREATE TABLE label_reservations (
    session_id TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    annotator  TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, event_id, annotator)
);

-- One row per session the queue has handed out from: the queue locks it, so that two
-- annotators asking at once are served one after the other.
CREATE TABLE label_queue_turns (
    session_id TEXT   PRIMARY KEY,
    turns      BIGINT NOT NULL
);

CREATE INDEX label_sets_by_status ON label_sets (status, session_id);
