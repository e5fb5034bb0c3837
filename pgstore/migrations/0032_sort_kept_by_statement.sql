-- The store's own statement writes the sort entries of the fields the
-- sort index keeps, not every member's (0030 wrote them all, so that
-- WithSortIndex(fields...) narrowed what was served but not a write's
-- cost). formsapi_addition_kept, which the statements call in place of
-- 0030's formsapi_addition (left as it was, for a node of an earlier
-- version, and so that 0030 and 0031 still run again over this one),
-- returns the kept fields' prefixes in `kept`
-- (NULL: every field, the setting 1; the statement's sort part reads
-- it), read after the sort lock: a statement's own snapshot predates
-- the lock it takes, so the list is read in the function, whose
-- statements each see what committed before them. While the setting is
-- 2, a writer that brings its sort keys takes the sort lock shared too
-- (as formsapi_sort_kept does for the triggers), so a change of the
-- list either waits for the write to commit, and then indexes its row
-- from sort_keys, or commits before the write reads the list. At
-- repeatable read or serializable the setting's row is locked FOR
-- SHARE, as for search, so a change after the transaction's snapshot
-- is a serialization failure, which the store retries. Entries of a
-- field not kept stay harmless (a row read with the setting 1 first
-- writes them all); a missing one is not possible.
DO $do$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION %1$I.formsapi_addition_kept(n bigint, search boolean, sorted boolean, OUT version bigint, OUT indexed boolean, OUT kept bytea[])
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ordered boolean;
    mode integer;
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
    SELECT coalesce(bool_or(name = 'search_index'), false), coalesce(bool_or(name = 'sort_index'), false),
        coalesce(max(value) FILTER (WHERE name = 'sort_index'), 0)
    INTO indexed, ordered, mode
    FROM %1$I.formsapi_settings WHERE name IN ('search_index', 'sort_index') AND value >= 1;
    IF (indexed AND NOT search) OR (ordered AND NOT sorted) THEN
        RETURN;
    END IF;
    IF sorted AND mode = 2 THEN
        PERFORM pg_advisory_xact_lock_shared(%3$s);
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM 1 FROM %1$I.formsapi_settings WHERE name = 'sort_index' FOR SHARE;
        END IF;
        SELECT value INTO mode FROM %1$I.formsapi_settings WHERE name = 'sort_index';
        IF mode = 2 THEN
            SELECT coalesce(array_agg(prefix), '{}') INTO kept FROM %1$I.formsapi_sort_fields;
        END IF;
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
