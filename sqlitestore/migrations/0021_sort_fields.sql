-- The sort index for named fields only (sqlitestore.WithSortIndex with
-- field names): its entries are what a write pays for (one index entry
-- per field, each a page of formsapi_sort the write dirties), so a host
-- that sorts by two fields should not pay for every member of every
-- submission.
--
-- The setting sort_index takes a third value: 0 off, 1 every field (as
-- 0019 kept it), 2 the fields of formsapi_sort_fields only. Writers still
-- store every member's sort key in sort_keys (so that a field added to
-- the list is indexed from the rows, without their data decoded, and no
-- writer's view of the list can make it miss one); the triggers copy into
-- formsapi_sort only the entries of the fields the setting keeps. The
-- store that changes the list (Open with another WithSortIndex) does it
-- in one write transaction: it sets the list, deletes the entries of the
-- fields it removes and inserts those of the fields it adds from every
-- row's sort_keys. Entries of a field not kept are harmless (each is a
-- true key of its row, and goes with the row); a missing one is not, and
-- the write lock makes sure there is none.
CREATE TABLE formsapi_sort_fields (
    name  TEXT PRIMARY KEY,
    field INTEGER NOT NULL
) WITHOUT ROWID;

DROP TRIGGER formsapi_sort_insert;
CREATE TRIGGER formsapi_sort_insert AFTER INSERT ON formsapi_submissions WHEN NEW.sort_keys IS NOT NULL BEGIN
    INSERT OR IGNORE INTO formsapi_sort (form_seq, field, value, created_at, seq)
    SELECT NEW.form_seq, j.value ->> 0, unhex(j.value ->> 1), NEW.created_at, NEW.seq FROM json_each(NEW.sort_keys) j
    WHERE (SELECT value FROM formsapi_settings WHERE name = 'sort_index') = 1
       OR j.value ->> 0 IN (SELECT field FROM formsapi_sort_fields);
END;

DROP TRIGGER formsapi_sort_update;
CREATE TRIGGER formsapi_sort_update AFTER UPDATE OF sort_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_sort WHERE (form_seq, field, value, created_at, seq) IN (
        SELECT OLD.form_seq, j.value ->> 0, unhex(j.value ->> 1), OLD.created_at, OLD.seq FROM json_each(coalesce(OLD.sort_keys, '[]')) j);
    INSERT OR IGNORE INTO formsapi_sort (form_seq, field, value, created_at, seq)
    SELECT NEW.form_seq, j.value ->> 0, unhex(j.value ->> 1), NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.sort_keys, '[]')) j
    WHERE (SELECT value FROM formsapi_settings WHERE name = 'sort_index') = 1
       OR j.value ->> 0 IN (SELECT field FROM formsapi_sort_fields);
END;
