-- Two holes in the search index's opt-in (0020), found by
-- TestSearchIndexTurnedOnWhileStrictWriteWaits and
-- TestSearchIndexTurnedOnWhileDeleteWaits:
--
-- A write at repeatable read or serializable (a host's database or role
-- may make either the default, and AddSubmission's first try runs at the
-- default) keeps the snapshot it started with: when it waited for the
-- search lock while another node turned the index on, its re-read of the
-- setting still answered off, and the row's trigrams were lost (the
-- turning on's copy did not see the uncommitted row). Under the lock it
-- now also locks the setting's row FOR SHARE, which at those levels fails
-- with a serialization failure (40001) when a transaction committed a
-- change to the row after the snapshot: the store retries such a write at
-- read committed, where the re-read sees the setting on. At read
-- committed (the usual default) nothing changes: no row lock.
--
-- A delete took no lock, so a delete not yet committed when the index
-- was turned on left the row to the copy, which indexed its trigrams
-- after the delete's trigger had removed its entries: they stayed,
-- pointing at nothing. The delete trigger now holds the lock shared, as
-- inserts and updates do, before it removes the entries.
--
-- Written to run again over itself, as 0016 to 0020 are.

CREATE OR REPLACE FUNCTION formsapi_search_indexed() RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1) THEN
        RETURN true;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(formsapi_search_lock());
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM formsapi_settings WHERE name = 'search_index' FOR SHARE;
    END IF;
    RETURN EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1);
END
$$;

CREATE OR REPLACE FUNCTION formsapi_find_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_search_indexed();
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    RETURN NULL;
END
$$;
