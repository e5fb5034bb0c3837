-- Versions that tell a read cache exactly what a commit changed, kept by
-- SQLite itself: triggers fire for every writer of the file, this package,
-- the host's own connections and other processes alike.
--
-- formsapi_clock counts changes. Each change to a form's submissions takes
-- the next count as the form's version, and so does a new form, so a
-- (seq, version) pair names one state of one form for the life of the
-- file, even if a deleted form's seq is reused by a new one.

CREATE TABLE formsapi_clock (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    now INTEGER NOT NULL
);

INSERT INTO formsapi_clock (id, now) VALUES (1, 1);

ALTER TABLE formsapi_forms ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

CREATE TRIGGER formsapi_forms_insert AFTER INSERT ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.seq;
END;

-- Only the columns a page of submissions depends on: the version column
-- itself is updated by these triggers and must not fire them again.
CREATE TRIGGER formsapi_forms_update AFTER UPDATE OF seq, id, account_id ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.seq;
END;

CREATE TRIGGER formsapi_submissions_insert AFTER INSERT ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.form_seq;
END;

CREATE TRIGGER formsapi_submissions_update AFTER UPDATE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq IN (OLD.form_seq, NEW.form_seq);
END;

CREATE TRIGGER formsapi_submissions_delete AFTER DELETE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = OLD.form_seq;
END;
