-- A form's fields (formsapi.FieldStore): each top-level member name of
-- its submissions' data, with the feed position of the first submission
-- that had it (first_pos) and, to order the names that one submission
-- brought, the member's place in that submission's data (ord). The CSV
-- export takes its columns from here in one read, before its first row.
--
-- Triggers keep it, so that every writer of the file does, this
-- package's inserts (which bring their position) and those numbered by
-- formsapi_submissions_feed_numbered (which this file makes again with
-- the fields added after the numbering) alike. SQLite's JSON functions
-- decode the names. Data that is not a JSON object adds nothing. An
-- upsert keeps the least (first_pos, ord) of a name. Deleting a
-- submission leaves the table as it is (a column may be empty); deleting
-- a form deletes its fields.

CREATE TABLE formsapi_fields (
    form_seq  INTEGER NOT NULL,
    name      TEXT    NOT NULL,
    first_pos INTEGER NOT NULL,
    ord       INTEGER NOT NULL,
    PRIMARY KEY (form_seq, name)
) WITHOUT ROWID;

-- DataFields: one form's fields in first position order.
CREATE INDEX formsapi_fields_order ON formsapi_fields (form_seq, first_pos, ord);

-- The fields of the submissions stored before this migration.
INSERT INTO formsapi_fields (form_seq, name, first_pos, ord)
SELECT s.form_seq, j.key, s.feed_pos, j.id
FROM formsapi_submissions AS s,
     json_each(CASE WHEN NOT json_valid(s.data) THEN '{}' WHEN json_type(s.data) = 'object' THEN s.data ELSE '{}' END) AS j
WHERE true
ON CONFLICT (form_seq, name) DO UPDATE SET first_pos = excluded.first_pos, ord = excluded.ord
WHERE (excluded.first_pos, excluded.ord) < (formsapi_fields.first_pos, formsapi_fields.ord);

CREATE TRIGGER formsapi_submissions_fields AFTER INSERT ON formsapi_submissions
WHEN NEW.feed_pos > 0 BEGIN
    INSERT INTO formsapi_fields (form_seq, name, first_pos, ord)
    SELECT NEW.form_seq, j.key, NEW.feed_pos, j.id
    FROM json_each(CASE WHEN NOT json_valid(NEW.data) THEN '{}' WHEN json_type(NEW.data) = 'object' THEN NEW.data ELSE '{}' END) AS j
    WHERE true
    ON CONFLICT (form_seq, name) DO UPDATE SET first_pos = excluded.first_pos, ord = excluded.ord
    WHERE (excluded.first_pos, excluded.ord) < (formsapi_fields.first_pos, formsapi_fields.ord);
END;

DROP TRIGGER formsapi_submissions_feed_numbered;

CREATE TRIGGER formsapi_submissions_feed_numbered AFTER INSERT ON formsapi_submissions
WHEN NEW.feed_pos = 0 BEGIN
    UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE seq = NEW.form_seq;
    UPDATE formsapi_submissions SET feed_pos = (SELECT feed_last FROM formsapi_forms WHERE seq = NEW.form_seq)
    WHERE seq = NEW.seq;
    INSERT INTO formsapi_fields (form_seq, name, first_pos, ord)
    SELECT NEW.form_seq, j.key, (SELECT feed_last FROM formsapi_forms WHERE seq = NEW.form_seq), j.id
    FROM json_each(CASE WHEN NOT json_valid(NEW.data) THEN '{}' WHEN json_type(NEW.data) = 'object' THEN NEW.data ELSE '{}' END) AS j
    WHERE true
    ON CONFLICT (form_seq, name) DO UPDATE SET first_pos = excluded.first_pos, ord = excluded.ord
    WHERE (excluded.first_pos, excluded.ord) < (formsapi_fields.first_pos, formsapi_fields.ord);
END;

CREATE TRIGGER formsapi_forms_fields_gone AFTER DELETE ON formsapi_forms BEGIN
    DELETE FROM formsapi_fields WHERE form_seq = OLD.seq;
END;
