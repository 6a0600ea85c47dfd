-- Uploads kept in object storage (`--upload-store s3`) have their rows in PostgreSQL only
-- (see ../postgres/0006_upload_objects.sql). On SQLite this migration creates nothing: it
-- keeps the version numbers of both backends in step.
SELECT 1;
