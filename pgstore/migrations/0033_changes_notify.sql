-- A notice for each transaction that writes the change log (issue 38,
-- docs/fleet.md "The live feed"): a node made WithNotify listens on the
-- channel and runs its waiters' check at once, instead of at the end of
-- its interval. The notice is a hint and never more: a node that misses
-- one (no listener, a pooler in transaction mode, a dropped connection)
-- finds the change at its next check, as before.
--
-- The channel is 'formsapi_changes_' and the log table's OID, so each
-- schema has its own (a channel's name is at most 63 bytes, which a
-- schema's name with a prefix may not be). PostgreSQL sends notices at
-- commit, once per channel and payload per transaction, whatever the
-- number of statements that asked: an upsert that fires the INSERT and
-- the UPDATE triggers below costs one notice.
--
-- Every statement may run again over itself (OR REPLACE).
CREATE OR REPLACE FUNCTION formsapi_changes_notify() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_notify('formsapi_changes_' || TG_RELID::text, '');
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER formsapi_changes_notify AFTER INSERT OR UPDATE ON formsapi_changes
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_changes_notify();
