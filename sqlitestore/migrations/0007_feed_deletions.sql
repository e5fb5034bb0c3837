-- Deletions in the sync feed (formsapi.FeedStore: items and deletions,
-- retention). Every deletion of a submission, by this package, the host's
-- own connection or another process, takes the form's next feed position
-- under SQLite's one write lock, in the deleting statement, and is kept as
-- a tombstone naming the position the deleted submission had: no data, no
-- metadata. deleted_at is NULL until the store stamps it by its clock in
-- its next deletion (the trigger cannot read the store's clock); the store
-- forgets tombstones past its retention then, and feed_purged keeps the
-- last position it forgot, so that a reader it concerns is told to start
-- over rather than miss a deletion.
ALTER TABLE formsapi_forms ADD COLUMN feed_purged INTEGER NOT NULL DEFAULT 0;

CREATE TABLE formsapi_tombstones (
    form_seq   INTEGER NOT NULL,
    feed_pos   INTEGER NOT NULL,
    of_pos     INTEGER NOT NULL, -- the feed_pos of the deleted submission
    deleted_at INTEGER,          -- Unix nanoseconds, UTC, by the store's clock; NULL until stamped
    PRIMARY KEY (form_seq, feed_pos)
) WITHOUT ROWID;

CREATE INDEX formsapi_tombstones_deleted_at ON formsapi_tombstones (deleted_at);

CREATE TRIGGER formsapi_submissions_tombstone AFTER DELETE ON formsapi_submissions BEGIN
    UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE seq = OLD.form_seq;
    INSERT INTO formsapi_tombstones (form_seq, feed_pos, of_pos)
    SELECT seq, feed_last, OLD.feed_pos FROM formsapi_forms WHERE seq = OLD.form_seq;
END;

-- A deleted form's tombstones go with it (a host's handle may not enforce
-- foreign keys, so a trigger rather than ON DELETE CASCADE).
CREATE TRIGGER formsapi_forms_delete_tombstones AFTER DELETE ON formsapi_forms BEGIN
    DELETE FROM formsapi_tombstones WHERE form_seq = OLD.seq;
END;
