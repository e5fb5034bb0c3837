-- One update of the form's row per submission written, not two. Before,
-- AddSubmission's statement moved feed_last (an update of the form's row)
-- and the insert's row trigger of 0016 then changed version (a second
-- update of the same row): two new row versions per write, one of them
-- dead at once, and, on a table of a few pages, the trigger's generic
-- plan scanned the whole table to find the row.
--
-- Now AddSubmission's update sets version itself, with
-- formsapi_addition_version(), which notes the value it gave in a
-- setting local to the transaction (named after the schema, as 0014's).
-- The insert's trigger leaves the form alone when the submission is an
-- addition (its feed_pos is the form's feed_last, so base stays, as in
-- 0016) and the form's version is the value noted: a value from
-- formsapi_next_version() is never given twice, so a version this
-- transaction was given is one no other state of the form had, and the
-- transaction's insert becomes visible with it, at commit. Any other
-- insert (a host's own SQL, an insert at another position, a version
-- changed since by anything) takes 0016's update, as before. A
-- savepoint rolled back takes its note with it (settings are undone with
-- the subtransaction).
--
-- The lock order is unchanged: the row trigger locked the form's row
-- that AddSubmission's update already held; the forms lists (0014) are
-- not involved (neither version nor feed_last is a listed column).
--
-- The update changes no indexed column (version, feed_last), so
-- PostgreSQL can write the new version in the same page (a HOT update)
-- when the page has room: the fillfactor below leaves half of each page
-- of formsapi_forms free for that (pages written from here on; existing
-- pages get it when the table is rewritten, by VACUUM FULL say).
--
-- Written to run again over itself, as 0016 and 0017 are. The functions
-- run with this migration's search_path.

ALTER TABLE formsapi_forms SET (fillfactor = 50);

CREATE OR REPLACE FUNCTION formsapi_addition_setting() RETURNS text LANGUAGE sql STABLE
SET search_path FROM CURRENT AS $$
    SELECT 'formsapi.added_' || md5(current_schema())
$$;

-- A fresh version for a form whose feed AddSubmission moves, noted for
-- the insert's trigger.
CREATE OR REPLACE FUNCTION formsapi_addition_version() RETURNS bigint LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
DECLARE
    v bigint := formsapi_next_version();
BEGIN
    PERFORM set_config(formsapi_addition_setting(), v::text, true);
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    noted text := current_setting(formsapi_addition_setting(), true);
BEGIN
    IF noted IS NOT NULL AND noted <> '' AND EXISTS (
        SELECT 1 FROM formsapi_forms
        WHERE seq = NEW.form_seq AND feed_last = NEW.feed_pos AND version = noted::bigint
    ) THEN
        RETURN NULL;
    END IF;
    UPDATE formsapi_forms SET version = formsapi_next_version(),
        base = CASE WHEN feed_last = NEW.feed_pos THEN base ELSE formsapi_next_version() END
    WHERE seq = NEW.form_seq;
    RETURN NULL;
END
$$;
