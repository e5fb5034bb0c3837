-- The forms list versions of 0009, written when the writer's transaction
-- commits rather than at each write, all of its accounts in one
-- statement in order of account ID.
--
-- Under 0009 each write of a form wrote its account's row of
-- formsapi_form_lists at once and held the row's lock to the end of the
-- transaction, so two transactions that changed forms of two accounts in
-- opposite orders (a host's: a1 then b1, and b2 then a2) each waited for
-- the other's row, and PostgreSQL aborted one with 40P01. Now a write
-- only notes its accounts, in a setting local to the transaction, and a
-- deferred constraint trigger, which PostgreSQL fires as the transaction
-- commits, writes every noted account's row in one statement, locking
-- them in order of account ID. Transactions then wait for each other's
-- rows only while committing, having written everything else, and all in
-- the same order: no cycle can form among them.
--
-- Why it is still exact (see 0009): every transaction that changes an
-- account's list still writes the account's row, in the same
-- transaction, before it commits, so it is ordered by that row's lock
-- after every earlier such transaction of the account and becomes
-- visible at once with its new version. Within the writing transaction
-- the version changes only at its end; nothing reads it there.
--
-- A host that sets its constraints IMMEDIATE (SET CONSTRAINTS ALL
-- IMMEDIATE) has the rows written at the end of each statement, as
-- under 0009, with 0009's deadlock. TRUNCATE (which locks the whole
-- table first) and an account's first key (which changes no version)
-- write their rows at once, as before.
--
-- Versions come from formsapi_next_version (0012), as every version does.
--
-- The setting is named after the schema, so the writes of two stores'
-- schemas in one transaction are kept apart; its value is a text[]
-- literal of account IDs, reset when the transaction ends.

-- The setting's name for this schema.
CREATE FUNCTION formsapi_form_lists_setting() RETURNS text LANGUAGE sql STABLE
SET search_path FROM CURRENT AS $$
    SELECT 'formsapi.lists_' || md5(current_schema())
$$;

-- Notes accounts whose lists the transaction changed.
CREATE FUNCTION formsapi_form_lists_note(accounts text[]) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    name  text := formsapi_form_lists_setting();
    noted text[] := coalesce(nullif(current_setting(name, true), '')::text[], '{}');
BEGIN
    IF NOT accounts <@ noted THEN
        PERFORM set_config(name, (SELECT array_agg(DISTINCT a) FROM unnest(noted || accounts) AS a)::text, true);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_form_lists_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_form_lists_note(ARRAY(SELECT DISTINCT account_id FROM formsapi_changed_forms));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_form_lists_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_form_lists_note(ARRAY[OLD.account_id, NEW.account_id]);
    RETURN NULL;
END
$$;

-- At commit: the first of the transaction's deferred events writes every
-- noted account's row, in order of account ID, and clears the note; the
-- others find it empty.
CREATE FUNCTION formsapi_form_lists_commit() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    name     text := formsapi_form_lists_setting();
    accounts text[] := nullif(current_setting(name, true), '')::text[];
BEGIN
    IF accounts IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM set_config(name, '', true);
    INSERT INTO formsapi_form_lists AS l (account_id, version)
    SELECT a.account_id, formsapi_next_version()
    FROM (SELECT DISTINCT account_id FROM unnest(accounts) AS u (account_id) ORDER BY account_id) AS a
    ON CONFLICT (account_id) DO UPDATE SET version = formsapi_next_version();
    RETURN NULL;
END
$$;

-- The deferred events: one per row that changed a list (constraint
-- triggers are row triggers), for the same writes as 0009's triggers.
CREATE CONSTRAINT TRIGGER formsapi_forms_lists_at_commit
AFTER INSERT OR DELETE ON formsapi_forms
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION formsapi_form_lists_commit();

CREATE CONSTRAINT TRIGGER formsapi_forms_lists_updated_at_commit
AFTER UPDATE OF id, account_id, title, icon, notification_email, created_at, seq ON formsapi_forms
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW WHEN ((OLD.id, OLD.account_id, OLD.title, OLD.icon, OLD.notification_email, OLD.created_at, OLD.seq)
    IS DISTINCT FROM (NEW.id, NEW.account_id, NEW.title, NEW.icon, NEW.notification_email, NEW.created_at, NEW.seq))
EXECUTE FUNCTION formsapi_form_lists_commit();
