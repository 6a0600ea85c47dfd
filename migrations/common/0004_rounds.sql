-- Rounds: a coding study's unit of work, its units fixed when it is created. The same in
-- SQLite and PostgreSQL.

CREATE TABLE rounds (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    codebook   TEXT NOT NULL,
    definition TEXT NOT NULL, -- JSON: the round's definition as created
    status     TEXT NOT NULL, -- 'open' | 'closed'
    created_at TEXT NOT NULL, -- RFC 3339, UTC, milliseconds
    created_by TEXT,          -- who created it (NULL: an open server's request)
    changed_at TEXT NOT NULL  -- the last close or reopen (else created_at)
);

-- A round's units, in the order its queue hands them out.
CREATE TABLE round_units (
    round_id   TEXT   NOT NULL,
    position   BIGINT NOT NULL,
    session_id TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    unit_type  TEXT   NOT NULL,
    PRIMARY KEY (round_id, position)
);

CREATE UNIQUE INDEX round_units_by_unit ON round_units (round_id, session_id, event_id);
