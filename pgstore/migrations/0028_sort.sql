-- The ordered index of sort keys that sorted lists walk (sort=<field>;
-- see internal/find/sort.go and internal/stored/sort.go). Each
-- submission keeps, in sort_keys, one entry for each top-level member
-- with a sort key (find.SortEntries), computed by the writer in Go: the
-- field's find.SortField (8 bytes, big-endian, its sign bit flipped) and
-- then the key, so that one form's entries of one field are one run of
-- formsapi_sort's primary key in the keys' byte order (bytea compares
-- as memcmp). The triggers copy them into formsapi_sort and remove them
-- with the submission, whoever deletes it. A sorted page walks that run
-- from its cursor: an index seek, so a deep page costs what the first
-- does. sort_keys NULL is a row not in the index yet.
--
-- The index is opt-in, as search's trigrams are (0020, 0021): a host that
-- never sorts should not pay for its entries. The setting sort_index says
-- whether it is kept: 0 (the default), and writers leave sort_keys NULL,
-- computing nothing, and a sorted list is not served; 1 once a store
-- opened with WithSortIndex turned it on and, in its migration's
-- transaction, indexed every row whose sort_keys is NULL. A write that
-- leaves the keys out calls formsapi_sort_indexed(), which holds the lock
-- formsapi_sort_lock() names shared until the write commits (and, at
-- repeatable read or serializable, locks the setting's row FOR SHARE,
-- as 0021 does for search), and writes nothing when it finds the setting
-- on; turning it on takes the lock exclusively first, so the rows it
-- indexes include every row written without keys. From then on the store
-- indexes, when it migrates, the rows a host's SQL inserted without them.
-- Written to run again over itself, as 0016 is.
ALTER TABLE formsapi_submissions ADD COLUMN IF NOT EXISTS sort_keys bytea[];

INSERT INTO formsapi_settings (name, value) VALUES ('sort_index', 0) ON CONFLICT (name) DO NOTHING;

CREATE OR REPLACE FUNCTION formsapi_sort_lock() RETURNS bigint LANGUAGE sql STABLE
SET search_path FROM CURRENT AS $$
    SELECT hashtextextended('formsapi sort index ' || current_schema(), 0)
$$;

CREATE OR REPLACE FUNCTION formsapi_sort_indexed() RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'sort_index' AND value = 1) THEN
        RETURN true;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(formsapi_sort_lock());
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM formsapi_settings WHERE name = 'sort_index' FOR SHARE;
    END IF;
    RETURN EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'sort_index' AND value = 1);
END
$$;

CREATE INDEX IF NOT EXISTS formsapi_submissions_unsorted ON formsapi_submissions (seq) WHERE sort_keys IS NULL;

CREATE TABLE IF NOT EXISTS formsapi_sort (
    form_seq   bigint NOT NULL,
    entry      bytea NOT NULL,
    created_at bigint NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (form_seq, entry, created_at, seq)
);

CREATE OR REPLACE FUNCTION formsapi_sort_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.sort_keys) k
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_sort_insert ON formsapi_submissions;
CREATE TRIGGER formsapi_sort_insert AFTER INSERT ON formsapi_submissions
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION formsapi_sort_insert();

CREATE OR REPLACE FUNCTION formsapi_sort_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM formsapi_sort f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.sort_keys) k
    ) d (form_seq, entry, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.entry = d.entry AND f.created_at = d.created_at AND f.seq = d.seq;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_sort_delete ON formsapi_submissions;
CREATE TRIGGER formsapi_sort_delete AFTER DELETE ON formsapi_submissions
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION formsapi_sort_delete();

-- An update that changes sort_keys (the store's indexing of rows without
-- them) moves the entries: the old ones go, the new ones come.
CREATE OR REPLACE FUNCTION formsapi_sort_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.seq = o.seq WHERE o.sort_keys IS DISTINCT FROM n.sort_keys) THEN
        RETURN NULL;
    END IF;
    -- Rows indexed for the first time had no entries: the planner,
    -- which cannot tell, hashed every entry of formsapi_sort for the
    -- DELETE of none, in each statement of the backfill.
    IF EXISTS (SELECT 1 FROM old_rows o WHERE cardinality(o.sort_keys) > 0) THEN
        DELETE FROM formsapi_sort f USING (
            SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.sort_keys) k
        ) d (form_seq, entry, created_at, seq)
        WHERE f.form_seq = d.form_seq AND f.entry = d.entry AND f.created_at = d.created_at AND f.seq = d.seq;
    END IF;
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.sort_keys) k
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_sort_update ON formsapi_submissions;
CREATE TRIGGER formsapi_sort_update AFTER UPDATE ON formsapi_submissions
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION formsapi_sort_update();

CREATE OR REPLACE FUNCTION formsapi_sort_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    TRUNCATE formsapi_sort;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_sort_truncate ON formsapi_submissions;
CREATE TRIGGER formsapi_sort_truncate AFTER TRUNCATE ON formsapi_submissions
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_sort_truncated();

-- The find index's update trigger (0023's) moved every updated row's
-- entries, whatever the update changed: setting sort_keys above on
-- 100,000 rows with the search index on deleted and inserted a hundred
-- trigram entries each, at 150 rows a second. It now returns at once
-- when no row's find_keys changed, and otherwise moves the entries as
-- before. (Filtering each of its statements to the changed rows instead,
-- by a join of the transition tables, made it slower still: 17.7 s for a
-- statement of 500 rows.)
CREATE OR REPLACE FUNCTION formsapi_find_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.seq = o.seq WHERE o.find_keys IS DISTINCT FROM n.find_keys) THEN
        RETURN NULL;
    END IF;
    indexed := formsapi_search_indexed();
    DELETE FROM formsapi_find_tail t USING old_rows o
    WHERE t.form_seq = o.form_seq AND t.created_at = o.created_at AND t.seq = o.seq;
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    WHERE k >= 0 OR indexed
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
