-- The index of submitted values that filters on submitted fields walk
-- (filter[<field>]=<value>; see internal/find). Each submission keeps, in
-- find_keys, a JSON array of the index keys of its top-level members
-- that a filter can name (find.Keys: a hash of the member's name and its
-- value's canonical JSON text), computed by the writer in Go; the
-- triggers copy them into formsapi_find, one entry per key, and remove
-- them with the submission. A filtered page walks the entries of one key
-- of one form in keyset order, so a filter costs its matches, not the
-- form's size. find_keys NULL is a row not indexed yet: Open indexes
-- such rows (those stored before this migration, or written by SQL that
-- does not set the column) before it returns.
ALTER TABLE formsapi_submissions ADD COLUMN find_keys TEXT;

CREATE INDEX formsapi_submissions_unindexed ON formsapi_submissions (seq) WHERE find_keys IS NULL;

CREATE TABLE formsapi_find (
    form_seq   INTEGER NOT NULL,
    key        INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    PRIMARY KEY (form_seq, key, created_at, seq)
) WITHOUT ROWID;

CREATE TRIGGER formsapi_find_insert AFTER INSERT ON formsapi_submissions WHEN NEW.find_keys IS NOT NULL BEGIN
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, value, NEW.created_at, NEW.seq FROM json_each(NEW.find_keys);
END;

CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')));
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, value, NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.find_keys, '[]'));
END;

CREATE TRIGGER formsapi_find_delete AFTER DELETE ON formsapi_submissions WHEN OLD.find_keys IS NOT NULL BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(OLD.find_keys));
END;
