-- The sort index for named fields only (pgstore.WithSortIndex with field
-- names): its entries are what a write pays for, one index entry per
-- field, so a host that sorts by two fields should not pay for every
-- member of every submission.
--
-- The setting sort_index takes a third value: 0 off, 1 every field (as
-- 0028 kept it), 2 the fields of formsapi_sort_fields only (each field's
-- name and the 8 bytes its entries begin with, sortPrefix). Writers still
-- store every member's sort key in sort_keys (so that a field added to
-- the list is indexed from the rows, and no writer's view of the list
-- can make it miss one); the triggers copy into formsapi_sort only the
-- entries of the fields the setting keeps, read by formsapi_sort_kept().
-- The store that changes the list (Open with another WithSortIndex) does
-- it in its migration's transaction: it takes the sort lock exclusively,
-- updates the setting's row, sets the list, deletes the entries of the
-- fields it removes and inserts those of the fields it adds from every
-- row's sort_keys. While the setting is 2, formsapi_sort_kept() holds the
-- sort lock shared until the write commits (and at repeatable read or
-- serializable locks the setting's row FOR SHARE, as 0021 does for
-- search), so a write either commits before the change reads the rows
-- or reads the list after it committed. Entries of a field not kept are
-- harmless (each is a true key of its row, and goes with the row); a
-- missing one would not be. Written to run again over itself, as 0016 is.
CREATE TABLE IF NOT EXISTS formsapi_sort_fields (
    name   text PRIMARY KEY,
    prefix bytea NOT NULL
);

CREATE OR REPLACE FUNCTION formsapi_sort_indexed() RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'sort_index' AND value > 0) THEN
        RETURN true;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(formsapi_sort_lock());
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM formsapi_settings WHERE name = 'sort_index' FOR SHARE;
    END IF;
    RETURN EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'sort_index' AND value > 0);
END
$$;

CREATE OR REPLACE FUNCTION formsapi_sort_kept() RETURNS integer LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
DECLARE
    mode integer;
BEGIN
    SELECT value INTO mode FROM formsapi_settings WHERE name = 'sort_index';
    IF mode = 2 THEN
        PERFORM pg_advisory_xact_lock_shared(formsapi_sort_lock());
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM 1 FROM formsapi_settings WHERE name = 'sort_index' FOR SHARE;
        END IF;
        SELECT value INTO mode FROM formsapi_settings WHERE name = 'sort_index';
    END IF;
    RETURN mode;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_sort_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    mode integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE cardinality(sort_keys) > 0) THEN
        RETURN NULL;
    END IF;
    mode := formsapi_sort_kept();
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.sort_keys) k
    WHERE mode = 1 OR substring(k from 1 for 8) IN (SELECT prefix FROM formsapi_sort_fields)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_sort_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    mode integer;
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
    mode := formsapi_sort_kept();
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.sort_keys) k
    WHERE mode = 1 OR substring(k from 1 for 8) IN (SELECT prefix FROM formsapi_sort_fields)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

-- 0030's formsapi_addition read the sort index as on for the value 1
-- only: it now reads 2 (named fields) as on too, so that a write that
-- left the sort keys out is refused and made again with them. (The
-- store's own statement writes every member's sort entry since 0030:
-- the list narrows the triggers' copies and the entries built when a
-- field is added, not those of the store's own inserts.)
DO $do$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION %1$I.formsapi_addition(n bigint, search boolean, sorted boolean, OUT version bigint, OUT indexed boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ordered boolean;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(%2$s);
    IF NOT sorted THEN
        PERFORM pg_advisory_xact_lock_shared(%3$s);
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM %1$I.formsapi_settings
        WHERE name = 'search_index' OR name = 'sort_index' AND NOT sorted
        FOR SHARE;
    END IF;
    SELECT coalesce(bool_or(name = 'search_index'), false), coalesce(bool_or(name = 'sort_index'), false)
    INTO indexed, ordered
    FROM %1$I.formsapi_settings WHERE name IN ('search_index', 'sort_index') AND value >= 1;
    IF (indexed AND NOT search) OR (ordered AND NOT sorted) THEN
        RETURN;
    END IF;
    version := nextval(%4$L::regclass) * 65536 + floor(random() * 65536)::bigint;
    PERFORM set_config('formsapi.written', '1', true);
END
$$$f$, current_schema(),
        hashtextextended('formsapi search index ' || current_schema(), 0),
        hashtextextended('formsapi sort index ' || current_schema(), 0),
        format('%I.formsapi_versions', current_schema()));
END
$do$;
