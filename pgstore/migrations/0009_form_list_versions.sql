-- A version for each account's forms list (GET /v1/forms), so that a read
-- cache can keep pages of it exactly, as 0006 does for pages of
-- submissions: the triggers below run in the transaction of whoever
-- writes, this package, the host's own SQL or another program, and change
-- the version of every account whose list the write changed, in the same
-- transaction, so none is seen before its version changes.
--
-- A version comes from formsapi_versions, the sequence of 0006, so a
-- value is never given twice, to an account or to a form. An account's
-- row is created by the first write that changes its list (or by its
-- first key, below), and a write that finds it missing (a host deleted it
-- by hand, say) creates it again with a fresh value. A missing row means
-- "cannot tell": a reader then reads the list from the database and
-- caches nothing under it.
--
-- Why that is exact: every transaction that changes an account's list
-- writes the account's row (an upsert, so that two writers of a new
-- account serialise on its key too), and so is ordered by that row's lock
-- after every earlier such transaction of the account, and becomes
-- visible at once with its new version. A snapshot that shows version V
-- therefore shows exactly the list written up to the transaction that set
-- V, whichever node or connection takes it.
--
-- The functions run with the search_path of this migration (the store's
-- schema), whatever the writer's connection has set.

CREATE TABLE formsapi_form_lists (
    account_id text   PRIMARY KEY,
    version    bigint NOT NULL
);

-- What changes a list: a form added, deleted, or updated in a column the
-- list shows (id, title, icon, notification_email, created_at), orders
-- by (created_at, seq) or selects by (account_id). A form moved to another
-- account changes both lists. A column added to the list later must be
-- added to the UPDATE trigger's columns below, in a new migration.
--
-- Updates are the hot write path of formsapi_forms, but not of the list:
-- every submission added or deleted updates its form's version and
-- feed_last (0006, 0008, AddSubmission), and feed_purged moves with
-- retention. So updates take a row trigger restricted to the list's
-- columns: with UPDATE OF, PostgreSQL does not even queue it for a
-- statement that sets none of them (the submission path sets only
-- version and feed_last), and the WHEN clause skips an update that sets
-- them to what they were, without calling the function. A statement
-- trigger with transition tables, as 0006 uses for bulk changes, cannot
-- name columns: it would capture the changed rows of every submission
-- write and run a function for each. A host's bulk update of the listed
-- columns changes each account's version once per row: correct, slower.
--
-- Inserts and deletes of forms are rare and may be bulk (an import, a
-- purge of an account): statement triggers with transition tables change
-- each account once per statement. The accounts are locked in order of
-- their ID, so two statements over the same accounts cannot deadlock on
-- their rows.

CREATE FUNCTION formsapi_form_lists_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_form_lists AS l (account_id, version)
    SELECT a.account_id, nextval('formsapi_versions')
    FROM (SELECT DISTINCT account_id FROM formsapi_changed_forms ORDER BY account_id) AS a
    ON CONFLICT (account_id) DO UPDATE SET version = nextval('formsapi_versions');
    RETURN NULL;
END
$$;

CREATE FUNCTION formsapi_form_lists_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_form_lists AS l (account_id, version)
    SELECT a.account_id, nextval('formsapi_versions')
    FROM (SELECT DISTINCT account_id FROM (VALUES (OLD.account_id), (NEW.account_id)) AS v (account_id) ORDER BY account_id) AS a
    ON CONFLICT (account_id) DO UPDATE SET version = nextval('formsapi_versions');
    RETURN NULL;
END
$$;

-- TRUNCATE names no rows: every account's list changes.
CREATE FUNCTION formsapi_form_lists_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_form_lists SET version = nextval('formsapi_versions');
    RETURN NULL;
END
$$;

-- An account's first key gives it a row if it has none, so that the
-- empty list of an account without forms is cached too. It changes no
-- list, so it leaves an existing row alone.
CREATE FUNCTION formsapi_form_lists_key_added() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_form_lists (account_id, version) VALUES (NEW.account_id, nextval('formsapi_versions'))
    ON CONFLICT (account_id) DO NOTHING;
    RETURN NULL;
END
$$;

-- The triggers come before the rows below: CREATE TRIGGER waits for the
-- writers of formsapi_forms and formsapi_keys in flight and holds off new
-- ones until this migration commits, so the rows below see every write
-- committed before, and every write after fires the triggers.

CREATE TRIGGER formsapi_forms_insert_list AFTER INSERT ON formsapi_forms
REFERENCING NEW TABLE AS formsapi_changed_forms
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_form_lists_changed();

CREATE TRIGGER formsapi_forms_delete_list AFTER DELETE ON formsapi_forms
REFERENCING OLD TABLE AS formsapi_changed_forms
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_form_lists_changed();

CREATE TRIGGER formsapi_forms_update_list
AFTER UPDATE OF id, account_id, title, icon, notification_email, created_at, seq ON formsapi_forms
FOR EACH ROW WHEN ((OLD.id, OLD.account_id, OLD.title, OLD.icon, OLD.notification_email, OLD.created_at, OLD.seq)
    IS DISTINCT FROM (NEW.id, NEW.account_id, NEW.title, NEW.icon, NEW.notification_email, NEW.created_at, NEW.seq))
EXECUTE FUNCTION formsapi_form_lists_updated();

CREATE TRIGGER formsapi_forms_truncate_list AFTER TRUNCATE ON formsapi_forms
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_form_lists_truncated();

CREATE TRIGGER formsapi_keys_insert_list AFTER INSERT ON formsapi_keys
FOR EACH ROW EXECUTE FUNCTION formsapi_form_lists_key_added();

-- Every account with a form or a key.
INSERT INTO formsapi_form_lists (account_id, version)
SELECT account_id, nextval('formsapi_versions')
FROM (SELECT account_id FROM formsapi_forms UNION SELECT account_id FROM formsapi_keys) AS a;
