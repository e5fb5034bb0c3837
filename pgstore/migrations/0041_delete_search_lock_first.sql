-- A deletion takes the search lock before its rows' forms' rows (issue
-- 37).
--
-- While the search index is off, a deletion holds formsapi_search_lock()
-- shared until it commits (migration 0021: formsapi_search_indexed, in
-- its statement trigger), which turning the index on takes exclusively.
-- But the deletion's tombstone (migration 0026's row trigger) takes its
-- form's feed position, and with it the form's row, before the
-- statement trigger runs; and the build that turns the index on updates
-- the versions of the forms it indexed at its end, under the lock. A
-- deletion that came while the build ran held its form's row and waited
-- for the lock, the build then waited for the row, and PostgreSQL ended
-- the deadlock by aborting one: the build, and so Open, whenever the
-- build's wait began more than deadlock_timeout after the deletion's
-- (TestSearchIndexBuildBesideDeletion). The store's writes take the lock
-- before the form's row already (migration 0030).
--
-- Here a statement trigger before the deletion takes it (reads the
-- setting, and while it is off waits for the lock), before any row is
-- deleted: the statement trigger after it then finds it held.
--
-- Written to run again over itself.

CREATE OR REPLACE FUNCTION formsapi_submissions_deleting() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_search_indexed();
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_submissions_deleting ON formsapi_submissions;
CREATE TRIGGER formsapi_submissions_deleting BEFORE DELETE ON formsapi_submissions
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_submissions_deleting();
