-- Versions that tell a read cache exactly what a commit changed (see
-- internal/pagecache), kept by PostgreSQL itself: the triggers below run
-- in the transaction of whoever writes, this package, the host's own SQL
-- or another program, so every write is covered and none is seen before
-- its version changes.
--
-- Each change to a form's submissions gives the form a fresh version from
-- formsapi_versions, and so does a new form and a change of its ID, owner
-- or seq, so that a (seq, version) pair names one state of one form for
-- the life of the schema. A sequence never gives a value twice, even when
-- a transaction that took one rolls back. It is not owned by a column, so
-- TRUNCATE ... RESTART IDENTITY leaves it alone; nothing else may reset it.
--
-- The functions run with the search_path of this migration (the store's
-- schema), whatever the writer's connection has set.

CREATE SEQUENCE formsapi_versions;

-- The volatile default gives every existing form a value of its own.
ALTER TABLE formsapi_forms ADD COLUMN version bigint NOT NULL DEFAULT nextval('formsapi_versions');

CREATE FUNCTION formsapi_new_form_version() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    NEW.version := nextval('formsapi_versions');
    RETURN NEW;
END
$$;

-- Whatever version an insert names, the form gets a fresh one.
CREATE TRIGGER formsapi_forms_insert_version BEFORE INSERT ON formsapi_forms
FOR EACH ROW EXECUTE FUNCTION formsapi_new_form_version();

-- Only changes to what a page of submissions depends on: the version
-- column itself is updated by the triggers on formsapi_submissions, and
-- feed_last by every insert.
CREATE TRIGGER formsapi_forms_update_version BEFORE UPDATE ON formsapi_forms
FOR EACH ROW WHEN ((OLD.seq, OLD.id, OLD.account_id) IS DISTINCT FROM (NEW.seq, NEW.id, NEW.account_id))
EXECUTE FUNCTION formsapi_new_form_version();

-- Inserts are the hot write path, one row at a time (AddSubmission): a
-- row trigger costs the server less CPU there than a statement trigger
-- with a transition table (measured in BENCHMARKS.md). A host's bulk
-- insert then changes its form's version once per row: correct, slower.
-- Updates and deletes are rare and may be bulk (a re-encoding at
-- migration, a host's repair or purge): statement triggers with
-- transition tables change each form touched once per statement. An
-- UPDATE changes the versions of the forms of every row it touched,
-- whichever columns it set, so no list of columns can be left behind
-- when a column is added.

CREATE FUNCTION formsapi_submissions_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = nextval('formsapi_versions') WHERE seq = NEW.form_seq;
    RETURN NULL;
END
$$;

CREATE FUNCTION formsapi_submissions_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = nextval('formsapi_versions')
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows);
    RETURN NULL;
END
$$;

CREATE FUNCTION formsapi_submissions_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = nextval('formsapi_versions')
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows UNION SELECT form_seq FROM formsapi_new_rows);
    RETURN NULL;
END
$$;

-- TRUNCATE names no rows: every form changes.
CREATE FUNCTION formsapi_submissions_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = nextval('formsapi_versions');
    RETURN NULL;
END
$$;

CREATE TRIGGER formsapi_submissions_insert_version AFTER INSERT ON formsapi_submissions
FOR EACH ROW EXECUTE FUNCTION formsapi_submissions_inserted();

CREATE TRIGGER formsapi_submissions_delete_version AFTER DELETE ON formsapi_submissions
REFERENCING OLD TABLE AS formsapi_old_rows
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_submissions_deleted();

CREATE TRIGGER formsapi_submissions_update_version AFTER UPDATE ON formsapi_submissions
REFERENCING OLD TABLE AS formsapi_old_rows NEW TABLE AS formsapi_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_submissions_updated();

CREATE TRIGGER formsapi_submissions_truncate_version AFTER TRUNCATE ON formsapi_submissions
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_submissions_truncated();
