-- The ordered index of sort keys that sorted lists walk (sort=<field>;
-- see internal/find/sort.go and internal/stored/sort.go). Each
-- submission keeps, in sort_keys, a JSON array of [field, key] pairs: for
-- each top-level member with a sort key (find.SortEntries), the field's
-- find.SortField and the key in hex, computed by the writer in Go; the
-- triggers copy them into formsapi_sort, one entry per member, and
-- remove them with the submission. A sorted page walks one form's
-- entries for one field in (value, created_at, seq) order, from its
-- cursor: an index seek, so a deep page costs what the first does.
-- sort_keys NULL is a row not in the index yet.
--
-- The index is opt-in, as search's trigrams are (0015): its entries cost
-- a write about as much again on this file (bench/writecost.sh,
-- BENCHMARKS.md), which a host that never sorts should not pay. The
-- setting sort_index says whether it is kept: 0 (the default) and
-- writers leave sort_keys NULL, computing nothing, and a sorted list is
-- not served; 1 once a store opened with WithSortIndex turned it on and,
-- in the same transaction, indexed every row whose sort_keys is NULL.
-- From then on every writer, of any process, sets sort_keys (its
-- statement writes nothing while it leaves them out and the setting is
-- on), and Open indexes the rows a host's SQL inserted without them.
ALTER TABLE formsapi_submissions ADD COLUMN sort_keys TEXT;

INSERT INTO formsapi_settings (name, value) VALUES ('sort_index', 0);

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
