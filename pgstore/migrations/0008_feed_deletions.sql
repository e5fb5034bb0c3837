-- Deletions in the sync feed (formsapi.FeedStore: items and deletions,
-- retention). Every deletion of a submission, by this package, a host's
-- connection or any node, takes the form's next feed position from the
-- counter on the form's row in the deleting transaction, under that row's
-- lock (held until commit, as for inserts, so positions become visible
-- in order), and is kept as a tombstone naming the position the deleted
-- submission had: no data, no metadata. deleted_at is NULL until the store
-- stamps it by its clock in its next deletion (the trigger cannot read
-- the store's clock); the store forgets tombstones past its retention
-- then, and feed_purged keeps the last position it forgot, so that a
-- reader it concerns is told to start over rather than miss a deletion.
ALTER TABLE formsapi_forms ADD COLUMN feed_purged bigint NOT NULL DEFAULT 0;

CREATE TABLE formsapi_tombstones (
    form_seq   bigint NOT NULL REFERENCES formsapi_forms (seq) ON DELETE CASCADE,
    feed_pos   bigint NOT NULL,
    of_pos     bigint NOT NULL, -- the feed_pos of the deleted submission
    deleted_at bigint,          -- Unix nanoseconds, UTC, by the store's clock; NULL until stamped
    PRIMARY KEY (form_seq, feed_pos)
);

CREATE INDEX formsapi_tombstones_deleted_at ON formsapi_tombstones (deleted_at);

CREATE FUNCTION formsapi_submissions_tombstone() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    pos bigint;
BEGIN
    UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE seq = OLD.form_seq RETURNING feed_last INTO pos;
    IF FOUND THEN
        INSERT INTO formsapi_tombstones (form_seq, feed_pos, of_pos) VALUES (OLD.form_seq, pos, OLD.feed_pos);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER formsapi_submissions_tombstone AFTER DELETE ON formsapi_submissions
FOR EACH ROW EXECUTE FUNCTION formsapi_submissions_tombstone();

-- TRUNCATE deletes without row triggers: no tombstones. Every reader of
-- every form is told to start over instead (a position past all it has
-- read is forgotten), so none keeps a copy of what was truncated.
CREATE OR REPLACE FUNCTION formsapi_submissions_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = nextval('formsapi_versions'), feed_last = feed_last + 1, feed_purged = feed_last + 1;
    RETURN NULL;
END
$$;
