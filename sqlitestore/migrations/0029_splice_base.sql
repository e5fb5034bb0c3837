-- Incremental pages (internal/pagecache, splice.go), as pgstore's
-- migrations 0016 and 0026 give them: a store that holds a page of a form
-- at an older version reads only what the form's feed gained since (the
-- submissions and tombstones above the page's feed_last) and splices it
-- into the page, if nothing else changed the form's submissions
-- meanwhile. base tells it so: a fresh value (the clock's next count,
-- migration 0010, so never one the form had before) with every change to
-- the form's submissions that is not an addition at the end of its feed
-- or a deletion, in the writing statement, whoever writes; an addition
-- and a deletion leave it alone. Existing forms start at 0: no count
-- given later is 0.
--
-- What is an addition: an insert whose feed_pos is the form's feed_last
-- + 1 (this package's statement takes it under SQLite's one write lock),
-- or 0, which formsapi_submissions_feed_numbered numbers feed_last + 1
-- (its UPDATE of the row's feed_pos, which changes nothing a page shows,
-- is no change either). Any other insert changes base, and so does any
-- other update of a submission (the store's own indexing and
-- re-encoding at Open too: a page is then read again once), a new form,
-- a change of a form's seq, ID or owner, and feed_last set lower by hand.
--
-- An INSERT OR REPLACE (or REPLACE, or an insert of a host's own ON
-- CONFLICT REPLACE) deletes the rows it conflicts with without their
-- AFTER DELETE triggers (0026): no tombstone says they went. A BEFORE
-- INSERT trigger still sees them: when one is there (the same seq, the
-- same form and feed position, the same form and host ID), base changes
-- (an INSERT OR IGNORE or an UPSERT that conflicts changes it too,
-- needlessly: a page is read again). An UPDATE OR REPLACE that gives a
-- submission another's seq deletes that other the same way (0028): a
-- BEFORE UPDATE trigger changes the base of its form too (the update
-- trigger changes the updated row's forms').
--
-- A deletion takes the form's next feed position for its tombstone
-- (0007), which now keeps the deleted submission's keyset position
-- (of_at, of_seq) beside its feed position, so that a splice can take it
-- out of a held page. Tombstones made before have NULLs there, and a page
-- they concern is read again. A tombstone that is not the deletion
-- trigger's (another position than the form's feed_last, no keyset
-- position, naming a submission that is still there, or a feed position
-- a submission still has: a host's insert by hand) changes base, and so
-- does a change of a tombstone's positions.
--
-- formsapi_submissions_insert and _feed_counted (0004, 0010) become one
-- trigger, which sets version, base and feed_last in one update of the
-- form's row: every trigger of an insert that reads feed_last then sees
-- the value before or after the insert as before, whatever order SQLite
-- runs them in, and a write updates the form's row once instead of twice.

ALTER TABLE formsapi_forms ADD COLUMN base INTEGER NOT NULL DEFAULT 0;
ALTER TABLE formsapi_tombstones ADD COLUMN of_at INTEGER;
ALTER TABLE formsapi_tombstones ADD COLUMN of_seq INTEGER;

DROP TRIGGER formsapi_forms_insert;
DROP TRIGGER formsapi_forms_update;
DROP TRIGGER formsapi_submissions_insert;
DROP TRIGGER formsapi_submissions_feed_counted;
DROP TRIGGER formsapi_submissions_update;
DROP TRIGGER formsapi_submissions_tombstone;

CREATE TRIGGER formsapi_forms_insert AFTER INSERT ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1),
        base = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq = NEW.seq;
END;

CREATE TRIGGER formsapi_forms_update AFTER UPDATE OF seq, id, account_id ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1),
        base = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq = NEW.seq;
END;

CREATE TRIGGER formsapi_forms_feed_back AFTER UPDATE OF feed_last ON formsapi_forms
WHEN NEW.feed_last < OLD.feed_last BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1),
        base = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq = NEW.seq;
END;

CREATE TRIGGER formsapi_submissions_insert AFTER INSERT ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1),
        base = CASE WHEN NEW.feed_pos = 0 OR NEW.feed_pos = feed_last + 1 THEN base
            ELSE (SELECT now FROM formsapi_clock WHERE id = 1) END,
        feed_last = max(feed_last, NEW.feed_pos)
    WHERE seq = NEW.form_seq;
END;

CREATE TRIGGER formsapi_submissions_update AFTER UPDATE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1),
        base = CASE WHEN OLD.feed_pos = 0 AND NEW.feed_pos > 0 AND OLD.form_seq = NEW.form_seq AND OLD.seq = NEW.seq
                AND OLD.created_at = NEW.created_at AND OLD.json IS NEW.json THEN base
            ELSE (SELECT now FROM formsapi_clock WHERE id = 1) END
    WHERE seq IN (OLD.form_seq, NEW.form_seq);
END;

CREATE TRIGGER formsapi_submissions_tombstone AFTER DELETE ON formsapi_submissions BEGIN
    UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE seq = OLD.form_seq;
    INSERT INTO formsapi_tombstones (form_seq, feed_pos, of_pos, of_at, of_seq)
    SELECT seq, feed_last, OLD.feed_pos, OLD.created_at, OLD.seq FROM formsapi_forms WHERE seq = OLD.form_seq;
END;

CREATE TRIGGER formsapi_tombstones_insert AFTER INSERT ON formsapi_tombstones
WHEN NEW.of_seq IS NULL OR NEW.of_at IS NULL
    OR NEW.feed_pos IS NOT (SELECT feed_last FROM formsapi_forms WHERE seq = NEW.form_seq)
    OR EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq = NEW.of_seq)
    OR EXISTS (SELECT 1 FROM formsapi_submissions WHERE form_seq = NEW.form_seq AND feed_pos = NEW.of_pos) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET base = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.form_seq;
END;

CREATE TRIGGER formsapi_tombstones_update AFTER UPDATE OF form_seq, feed_pos, of_pos, of_at, of_seq ON formsapi_tombstones BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET base = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq IN (OLD.form_seq, NEW.form_seq);
END;

CREATE TRIGGER formsapi_submissions_replace_base BEFORE INSERT ON formsapi_submissions
WHEN EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq = NEW.seq)
    OR EXISTS (SELECT 1 FROM formsapi_submissions WHERE form_seq = NEW.form_seq AND feed_pos = NEW.feed_pos)
    OR NEW.host_id <> '' AND EXISTS (SELECT 1 FROM formsapi_submissions WHERE form_seq = NEW.form_seq AND host_id = NEW.host_id) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET base = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq IN (NEW.form_seq, (SELECT form_seq FROM formsapi_submissions WHERE seq = NEW.seq));
END;

CREATE TRIGGER formsapi_submissions_seq_replace_base BEFORE UPDATE OF seq ON formsapi_submissions
WHEN NEW.seq IS NOT OLD.seq AND EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq = NEW.seq) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET base = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq = (SELECT form_seq FROM formsapi_submissions WHERE seq = NEW.seq);
END;
