-- Uploads whose files are kept in S3-compatible object storage (`--upload-store s3`): the
-- row stays in `uploads` (so that replicas follow it as any other), and names the
-- generation of objects holding its files instead of rows of `upload_chunks`.
--
-- NULL: the files are in upload_chunks (every row written by `--upload-store postgres`,
-- and every row of a database from before this migration). Otherwise the files are the
-- objects `<prefix>/uploads/<id>/<object_generation>/<file_no>` of the bucket, and the
-- upload has no chunks. A generation is `<ms since the epoch>-<16 hex digits>`, new for
-- each save: a deletion removes only the objects of the generation its row named.
ALTER TABLE uploads ADD COLUMN object_generation TEXT;
