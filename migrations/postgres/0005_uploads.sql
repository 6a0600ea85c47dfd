-- Uploads kept in the database (`--upload-store postgres`), so that every replica on it
-- serves every upload. PostgreSQL only: ../sqlite/0005_uploads.sql keeps the version
-- numbers of both in step and creates nothing. Created whatever the upload store, like the
-- rest of the schema; unused with `--upload-store local`.

-- One row per upload: what <data-dir>/uploads/<id>/manifest.json holds in a local store,
-- plus each file's length.
CREATE TABLE uploads (
    id            TEXT     PRIMARY KEY, -- content-derived (16 hex digits)
    framework     TEXT     NOT NULL,
    created_at_ms BIGINT   NOT NULL,    -- first accepted, ms since the epoch
    names         TEXT[]   NOT NULL,    -- the original file names, in upload order
    file_sizes    BIGINT[] NOT NULL,    -- each file's length in bytes, same order
    message_count BIGINT   NOT NULL,
    node_count    BIGINT   NOT NULL,
    edge_count    BIGINT   NOT NULL,
    count_rules   INTEGER  NOT NULL     -- the rules the counts were made by
);

-- The files' bytes, in chunks of 1 MiB (the last of a file shorter; none for an empty
-- file), written in the same transaction as their upload's row and removed with it.
CREATE TABLE upload_chunks (
    upload_id TEXT    NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    file_no   INTEGER NOT NULL, -- the file's place in uploads.names
    chunk_no  INTEGER NOT NULL,
    bytes     BYTEA   NOT NULL,
    PRIMARY KEY (upload_id, file_no, chunk_no)
);
