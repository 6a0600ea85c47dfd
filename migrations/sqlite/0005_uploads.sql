-- Uploads are kept in the database only on PostgreSQL (`--upload-store postgres`, see
-- ../postgres/0005_uploads.sql). On SQLite this migration creates nothing: it keeps the
-- version numbers of both backends in step, so that a later migration common to both has
-- the same number on each.
SELECT 1;
