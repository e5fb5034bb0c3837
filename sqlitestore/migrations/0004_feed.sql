-- The sync feed: each form's submissions in commit order.
--
-- feed_pos numbers a form's submissions 1, 2, 3... and feed_last on the
-- form row is the last number given. A number is taken in the statement
-- that inserts the submission, under SQLite's one write lock, and
-- committed with it, so a reader never sees a position while a lower one
-- is still to come.
--
-- This package's inserts bring their position (the form's feed_last + 1)
-- and a trigger moves the counter to it. An insert without one, from the
-- host's own connection or from an older version of this package still
-- running while a newer one migrated the file, has feed_pos 0 and is
-- numbered by a second trigger, so every writer of the file feeds the feed.

ALTER TABLE formsapi_forms ADD COLUMN feed_last INTEGER NOT NULL DEFAULT 0;
ALTER TABLE formsapi_submissions ADD COLUMN feed_pos INTEGER NOT NULL DEFAULT 0;

-- Submissions stored before this migration take positions in seq order,
-- the order they were inserted.
UPDATE formsapi_submissions SET feed_pos = r.pos
FROM (SELECT seq, row_number() OVER (PARTITION BY form_seq ORDER BY seq) AS pos FROM formsapi_submissions) AS r
WHERE formsapi_submissions.seq = r.seq;

UPDATE formsapi_forms SET feed_last = (SELECT COUNT(*) FROM formsapi_submissions WHERE form_seq = formsapi_forms.seq);

-- SyncSubmissions: one form's submissions in feed order; unique, so no
-- two submissions of a form can ever share a position.
CREATE UNIQUE INDEX formsapi_submissions_feed ON formsapi_submissions (form_seq, feed_pos);

CREATE TRIGGER formsapi_submissions_feed_counted AFTER INSERT ON formsapi_submissions
WHEN NEW.feed_pos > 0 BEGIN
    UPDATE formsapi_forms SET feed_last = NEW.feed_pos WHERE seq = NEW.form_seq AND feed_last < NEW.feed_pos;
END;

CREATE TRIGGER formsapi_submissions_feed_numbered AFTER INSERT ON formsapi_submissions
WHEN NEW.feed_pos = 0 BEGIN
    UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE seq = NEW.form_seq;
    UPDATE formsapi_submissions SET feed_pos = (SELECT feed_last FROM formsapi_forms WHERE seq = NEW.form_seq)
    WHERE seq = NEW.seq;
END;
