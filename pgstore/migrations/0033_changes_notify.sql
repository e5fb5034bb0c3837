-- A notice for each transaction that writes the change log (issue 38,
-- docs/fleet.md "The live feed"): a node made WithNotify listens on the
-- channel and runs its waiters' check at once, instead of at the end of
-- its interval. The notice is a hint and never more: a node that misses
-- one (no listener, a pooler in transaction mode, a dropped connection)
-- finds the change at its next check, as before.
--
-- Notices are sent only while some node listens: a listening node
-- renews the setting notify_until (seconds since the epoch) to a minute
-- ahead every 20 seconds. A transaction that notifies takes a lock at
-- commit that every other notifying transaction of the cluster waits
-- for (PostgreSQL's async.c), so writers that no one listens to must not
-- pay it.
--
-- The channel is 'formsapi_changes_' and the log table's OID, so each
-- schema has its own (a channel's name is at most 63 bytes, which a
-- schema's name with a prefix may not be). PostgreSQL sends notices at
-- commit, once per channel and payload per transaction, whatever the
-- number of statements that asked. Every write of the log is an INSERT
-- (an upsert, ON CONFLICT DO UPDATE, whose statement fires the INSERT
-- statement triggers whether it inserts or updates), so the trigger is
-- on INSERT alone: one call per statement.
--
-- Every statement may run again over itself (IF NOT EXISTS, OR REPLACE,
-- ON CONFLICT DO NOTHING).
INSERT INTO formsapi_settings (name, value) VALUES ('notify_until', 0) ON CONFLICT (name) DO NOTHING;

CREATE OR REPLACE FUNCTION formsapi_changes_notify() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'notify_until' AND value > extract(epoch FROM statement_timestamp())) THEN
        PERFORM pg_notify('formsapi_changes_' || TG_RELID::text, '');
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER formsapi_changes_notify AFTER INSERT ON formsapi_changes
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_changes_notify();
