-- Incremental pages (internal/pagecache, splice.go): a node that holds a
-- page of a form at an older version reads only the submissions added
-- since, if nothing else changed the form's submissions meanwhile. base
-- tells it so: a fresh value (from formsapi_next_version(), so never one
-- the form had before) with every change to the form's submissions that
-- is not an addition at the end of its feed, in the writer's transaction,
-- whoever writes; an addition leaves it alone. Together with feed_last
-- (every addition takes the next feed position, 0001 and AddSubmission),
-- a reader that finds base as it was knows that what changed since is
-- exactly the submissions above the feed_last it saw.
--
-- What is an addition: an insert whose feed_pos is the form's feed_last
-- when its row trigger runs, which is what AddSubmission's statement does
-- (it takes feed_last + 1 under the form's row lock and inserts with it).
-- A host's insert that takes a position of its own otherwise (below the
-- last, or without moving feed_last) changes base, and so does an update
-- or deletion of submissions, TRUNCATE, a new form, a change of a form's
-- ID, owner or seq, and feed_last set lower by hand. Existing forms start
-- at 0: no value given later is 0.
--
-- The functions are those of 0012 with base set beside version, and run
-- with this migration's search_path.

-- Written so that it can run again over itself (IF NOT EXISTS, OR
-- REPLACE), as a test of 0015 makes it.

ALTER TABLE formsapi_forms ADD COLUMN IF NOT EXISTS base bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION formsapi_new_form_version() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    NEW.version := formsapi_next_version();
    NEW.base := formsapi_next_version();
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER formsapi_forms_feed_back_version BEFORE UPDATE ON formsapi_forms
FOR EACH ROW WHEN (NEW.feed_last < OLD.feed_last)
EXECUTE FUNCTION formsapi_new_form_version();

CREATE OR REPLACE FUNCTION formsapi_submissions_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version(),
        base = CASE WHEN feed_last = NEW.feed_pos THEN base ELSE formsapi_next_version() END
    WHERE seq = NEW.form_seq;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version(), base = formsapi_next_version()
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version(), base = formsapi_next_version()
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows UNION SELECT form_seq FROM formsapi_new_rows);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version(), base = formsapi_next_version(),
        feed_last = feed_last + 1, feed_purged = feed_last + 1;
    RETURN NULL;
END
$$;
