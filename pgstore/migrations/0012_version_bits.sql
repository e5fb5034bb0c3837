-- Versions that a restore cannot give again to another state. A restore
-- from pg_dump, a point-in-time recovery or a failover to a replica that
-- missed commits takes formsapi_versions back, and the values after that
-- point are given again, to other states of the same forms and lists: a
-- node still holding a page read before the restore could take the new
-- state for the one it read (internal/pagecache). From here on a version
-- is the sequence's value times 65,536 plus 16 random bits, so a value
-- given again after a restore is another version but for one chance in
-- 65,536. Versions still grow with the sequence, and every new one is
-- above every one given before this migration (a value times 65,536 is
-- above the value); 2^47 changes are left before bigint runs out.
--
-- The functions are those of 0006, 0008 and 0009 with nextval replaced
-- by formsapi_next_version(), and run with this migration's search_path.

CREATE FUNCTION formsapi_next_version() RETURNS bigint LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
BEGIN
    RETURN nextval('formsapi_versions') * 65536 + floor(random() * 65536)::bigint;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_new_form_version() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    NEW.version := formsapi_next_version();
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version() WHERE seq = NEW.form_seq;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version()
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version()
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows UNION SELECT form_seq FROM formsapi_new_rows);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version(), feed_last = feed_last + 1, feed_purged = feed_last + 1;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_form_lists_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_form_lists AS l (account_id, version)
    SELECT a.account_id, formsapi_next_version()
    FROM (SELECT DISTINCT account_id FROM formsapi_changed_forms ORDER BY account_id) AS a
    ON CONFLICT (account_id) DO UPDATE SET version = formsapi_next_version();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_form_lists_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_form_lists AS l (account_id, version)
    SELECT a.account_id, formsapi_next_version()
    FROM (SELECT DISTINCT account_id FROM (VALUES (OLD.account_id), (NEW.account_id)) AS v (account_id) ORDER BY account_id) AS a
    ON CONFLICT (account_id) DO UPDATE SET version = formsapi_next_version();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_form_lists_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_form_lists SET version = formsapi_next_version();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_form_lists_key_added() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_form_lists (account_id, version) VALUES (NEW.account_id, formsapi_next_version())
    ON CONFLICT (account_id) DO NOTHING;
    RETURN NULL;
END
$$;
