-- Several codebooks: every set, change, suggestion and reservation belongs to one, and a
-- set records the version of the codebook it was written under. The same in SQLite and
-- PostgreSQL.
--
-- Rows written before are given the codebook '' here; the server gives them its default
-- codebook when it opens the database (LabelStore::adopt_unassigned), since which codebook
-- that is depends on its configuration, not on the database.

CREATE TABLE label_sets_by_codebook (
    codebook         TEXT   NOT NULL,
    session_id       TEXT   NOT NULL,
    event_id         TEXT   NOT NULL,
    annotator        TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    labels           TEXT   NOT NULL, -- JSON array of label records
    note             TEXT,
    lead_time_ms     BIGINT,
    version          BIGINT NOT NULL,
    updated_at       TEXT   NOT NULL, -- RFC 3339, UTC, milliseconds
    codebook_version TEXT,            -- the codebook's version at the write (NULL: unknown)
    PRIMARY KEY (codebook, session_id, event_id, annotator)
);
INSERT INTO label_sets_by_codebook (codebook, session_id, event_id, annotator, status, labels, note,
    lead_time_ms, version, updated_at, codebook_version)
    SELECT '', session_id, event_id, annotator, status, labels, note, lead_time_ms, version,
        updated_at, NULL
    FROM label_sets;
DROP TABLE label_sets;
ALTER TABLE label_sets_by_codebook RENAME TO label_sets;
CREATE INDEX label_sets_by_status ON label_sets (codebook, status, session_id);

ALTER TABLE label_history ADD COLUMN codebook TEXT NOT NULL DEFAULT '';
DROP INDEX label_history_unit;
CREATE INDEX label_history_unit ON label_history (codebook, session_id, event_id, annotator, version);

CREATE TABLE label_suggestions_by_codebook (
    codebook   TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    model      TEXT   NOT NULL,
    score      DOUBLE PRECISION,
    labels     TEXT   NOT NULL, -- JSON array of label records
    updated_at TEXT   NOT NULL, -- RFC 3339, UTC, milliseconds
    PRIMARY KEY (codebook, session_id, event_id, model)
);
INSERT INTO label_suggestions_by_codebook (codebook, session_id, event_id, model, score, labels,
    updated_at)
    SELECT '', session_id, event_id, model, score, labels, updated_at FROM label_suggestions;
DROP TABLE label_suggestions;
ALTER TABLE label_suggestions_by_codebook RENAME TO label_suggestions;

CREATE TABLE label_reservations_by_codebook (
    codebook   TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    annotator  TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (codebook, session_id, event_id, annotator)
);
INSERT INTO label_reservations_by_codebook (codebook, session_id, event_id, annotator, expires_at)
    SELECT '', session_id, event_id, annotator, expires_at FROM label_reservations;
DROP TABLE label_reservations;
ALTER TABLE label_reservations_by_codebook RENAME TO label_reservations;
