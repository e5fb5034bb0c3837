-- The change log the nodes follow (issue 38, docs/fleet.md "Nodes that
-- follow the log"): one row per key, form and forms list that has ever
-- changed, naming it and the transaction that changed it last. A node
-- keeps the PostgreSQL snapshot of its last round (pg_current_snapshot());
-- its next round reads, in one statement and so in one snapshot, the
-- rows whose transaction that snapshot did not see (xid at or past its
-- xmax, or among its in-progress xids) and the current state of what they
-- name. A transaction that commits late is in the earlier snapshot's
-- in-progress list or past its xmax, so no commit is ever skipped,
-- however long it ran; and what a round reads is state, not a delta, so
-- reading a row twice is harmless.
--
-- Written by row triggers, whoever writes (this package, a host's SQL, a
-- restore): one upsert of the row of what changed, at most one per thing
-- per transaction (the WHERE below skips the same transaction's second
-- change). The row's lock orders writers of one thing as the thing's own
-- row lock already does, taken just after it, so no new lock cycle can
-- form. Rows are never deleted (a key, form or account leaves one row);
-- TRUNCATE, which fires no row triggers, writes the row of kind 0, which
-- tells every node to forget everything it copied.
--
-- kind: 0 everything, 1 a key (ref: its hash), 2 a form (ref: its ID,
-- UTF-8), 3 an account's forms list (ref: the account ID, UTF-8).
--
-- Every statement may run again over itself (IF NOT EXISTS, OR REPLACE),
-- as the tests that re-apply the migrations after 0015 or 0023 do.
CREATE TABLE IF NOT EXISTS formsapi_changes (
    kind smallint NOT NULL,
    ref  bytea    NOT NULL,
    xid  xid8     NOT NULL,
    PRIMARY KEY (kind, ref)
);

CREATE INDEX IF NOT EXISTS formsapi_changes_xid ON formsapi_changes (xid);

-- PL/pgSQL, not SQL: a SQL function called from a trigger is planned
-- again on every call, a PL/pgSQL statement once per session.
CREATE OR REPLACE FUNCTION formsapi_change(k smallint, r bytea) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_changes AS c (kind, ref, xid) VALUES (k, r, pg_current_xact_id())
    ON CONFLICT (kind, ref) DO UPDATE SET xid = excluded.xid WHERE c.xid <> excluded.xid;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_keys_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM formsapi_change(1::smallint, OLD.key_hash);
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.key_hash <> OLD.key_hash) THEN
        PERFORM formsapi_change(1::smallint, NEW.key_hash);
    END IF;
    RETURN NULL;
END
$$;

-- Every column a lookup reads; last_used_at (written in batches by every
-- node) and created_at are not among them.
CREATE OR REPLACE TRIGGER formsapi_keys_changed AFTER INSERT OR DELETE ON formsapi_keys
FOR EACH ROW EXECUTE FUNCTION formsapi_keys_changed();
CREATE OR REPLACE TRIGGER formsapi_keys_updated AFTER UPDATE ON formsapi_keys
FOR EACH ROW WHEN ((OLD.key_hash, OLD.account_id, OLD.forms, OLD.expires_at, OLD.revoked_at)
    IS DISTINCT FROM (NEW.key_hash, NEW.account_id, NEW.forms, NEW.expires_at, NEW.revoked_at))
EXECUTE FUNCTION formsapi_keys_changed();

CREATE OR REPLACE FUNCTION formsapi_forms_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM formsapi_change(2::smallint, convert_to(OLD.id, 'UTF8'));
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.id <> OLD.id) THEN
        PERFORM formsapi_change(2::smallint, convert_to(NEW.id, 'UTF8'));
    END IF;
    RETURN NULL;
END
$$;

-- What a lookup reads of a form: its ID, account, seq, version and
-- incarnation. Every write of a submission changes the version.
CREATE OR REPLACE TRIGGER formsapi_forms_changed AFTER INSERT OR DELETE ON formsapi_forms
FOR EACH ROW EXECUTE FUNCTION formsapi_forms_changed();
CREATE OR REPLACE TRIGGER formsapi_forms_updated AFTER UPDATE ON formsapi_forms
FOR EACH ROW WHEN ((OLD.id, OLD.account_id, OLD.seq, OLD.version, OLD.incarnation)
    IS DISTINCT FROM (NEW.id, NEW.account_id, NEW.seq, NEW.version, NEW.incarnation))
EXECUTE FUNCTION formsapi_forms_changed();

CREATE OR REPLACE FUNCTION formsapi_form_lists_logged() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM formsapi_change(3::smallint, convert_to(OLD.account_id, 'UTF8'));
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.account_id <> OLD.account_id) THEN
        PERFORM formsapi_change(3::smallint, convert_to(NEW.account_id, 'UTF8'));
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER formsapi_form_lists_logged AFTER INSERT OR UPDATE OR DELETE ON formsapi_form_lists
FOR EACH ROW EXECUTE FUNCTION formsapi_form_lists_logged();

CREATE OR REPLACE FUNCTION formsapi_truncated_changes() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_change(0::smallint, ''::bytea);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER formsapi_keys_truncated_changes AFTER TRUNCATE ON formsapi_keys
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_truncated_changes();
CREATE OR REPLACE TRIGGER formsapi_forms_truncated_changes AFTER TRUNCATE ON formsapi_forms
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_truncated_changes();
CREATE OR REPLACE TRIGGER formsapi_form_lists_truncated_changes AFTER TRUNCATE ON formsapi_form_lists
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_truncated_changes();
