-- The ordered index of sort keys that sorted lists walk (sort=<field>;
-- see internal/find/sort.go and internal/stored/sort.go). Each
-- submission keeps, in sort_keys, a JSON array of [field, key] pairs: for
-- each top-level member with a sort key (find.SortEntries), the field's
-- find.SortField and the key in hex, computed by the writer in Go; the
-- triggers copy them into formsapi_sort, one entry per member, and
-- remove them with the submission. A sorted page walks one form's
-- entries for one field in (value, created_at, seq) order, from its
-- cursor: an index seek, so a deep page costs what the first does.
-- sort_keys NULL is a row not in the index yet: Open indexes such rows
-- (those stored before this migration, or written by SQL that does not
-- set the column) before it returns, as it does find_keys.
ALTER TABLE formsapi_submissions ADD COLUMN sort_keys TEXT;

CREATE INDEX formsapi_submissions_unsorted ON formsapi_submissions (seq) WHERE sort_keys IS NULL;

CREATE TABLE formsapi_sort (
    form_seq   INTEGER NOT NULL,
    field      INTEGER NOT NULL,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    PRIMARY KEY (form_seq, field, value, created_at, seq)
) WITHOUT ROWID;

CREATE TRIGGER formsapi_sort_insert AFTER INSERT ON formsapi_submissions WHEN NEW.sort_keys IS NOT NULL BEGIN
    INSERT OR IGNORE INTO formsapi_sort (form_seq, field, value, created_at, seq)
    SELECT NEW.form_seq, j.value ->> 0, unhex(j.value ->> 1), NEW.created_at, NEW.seq FROM json_each(NEW.sort_keys) j;
END;

CREATE TRIGGER formsapi_sort_update AFTER UPDATE OF sort_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_sort WHERE (form_seq, field, value, created_at, seq) IN (
        SELECT OLD.form_seq, j.value ->> 0, unhex(j.value ->> 1), OLD.created_at, OLD.seq FROM json_each(coalesce(OLD.sort_keys, '[]')) j);
    INSERT OR IGNORE INTO formsapi_sort (form_seq, field, value, created_at, seq)
    SELECT NEW.form_seq, j.value ->> 0, unhex(j.value ->> 1), NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.sort_keys, '[]')) j;
END;

CREATE TRIGGER formsapi_sort_delete AFTER DELETE ON formsapi_submissions WHEN OLD.sort_keys IS NOT NULL BEGIN
    DELETE FROM formsapi_sort WHERE (form_seq, field, value, created_at, seq) IN (
        SELECT OLD.form_seq, j.value ->> 0, unhex(j.value ->> 1), OLD.created_at, OLD.seq FROM json_each(OLD.sort_keys) j);
END;
