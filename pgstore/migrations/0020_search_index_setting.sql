-- Search's trigram index is opt-in (issue 27). Indexing every value's
-- trigrams costs each write about a hundred inserts at random places in
-- formsapi_find (bench/writecost.sh: AddSubmission 3.0 -> 6.9 ms, and
-- PostgreSQL's CPU per write 1.0 -> 3.3 ms), which every host paid whether
-- anyone searched or not. Whether the index holds trigram entries is now a
-- setting kept here, in the schema, so every node agrees and none can
-- leave the index incomplete: off by default, turned on by a store opened
-- with WithSearchIndex, which in its migration transaction indexes the
-- trigrams of every stored row. The writers still put every key in
-- find_keys (filters' and trigrams'); the triggers copy a trigram key
-- (negative) into formsapi_find only while the setting is on. Searches
-- walk the form's submissions while it is off.
--
-- A write that finds the setting off takes a shared advisory lock (the
-- key formsapi_search_lock() names, one per schema) until it commits, and
-- reads the setting again under it; turning the setting on takes the lock
-- exclusively first. So the rows the turning on indexes are all those
-- committed before it, and every write after it sees the setting on: no
-- row is left without its trigrams. A shared advisory lock is taken in
-- memory, not written to any row.
--
-- The trigram entries stored so far are deleted: with the setting off
-- they would go stale (rows added later lack theirs) and take space for
-- nothing. This reads the whole of formsapi_find once.
--
-- Written to run again over itself, as 0016 to 0018 are.

CREATE TABLE IF NOT EXISTS formsapi_settings (
    name  text   PRIMARY KEY,
    value bigint NOT NULL
);

INSERT INTO formsapi_settings (name, value) VALUES ('search_index', 0) ON CONFLICT (name) DO NOTHING;

CREATE OR REPLACE FUNCTION formsapi_search_lock() RETURNS bigint LANGUAGE sql STABLE
SET search_path FROM CURRENT AS $$
    SELECT hashtextextended('formsapi search index ' || current_schema(), 0)
$$;

-- Whether the index takes trigram entries, for a write: when the setting
-- is off, under the shared lock that turning it on waits for.
CREATE OR REPLACE FUNCTION formsapi_search_indexed() RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1) THEN
        RETURN true;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(formsapi_search_lock());
    RETURN EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1);
END
$$;

CREATE OR REPLACE FUNCTION formsapi_find_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean := formsapi_search_indexed();
BEGIN
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    WHERE k >= 0 OR indexed
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_find_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean := formsapi_search_indexed();
BEGIN
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    WHERE k >= 0 OR indexed
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DELETE FROM formsapi_find WHERE key < 0;
