-- A host's insert and update of find_keys fold their own forms' tails
-- (issue 37).
--
-- Since migration 0038 the store's writes fold their own form's tail,
-- once it holds 256 rows, and leave every other form's alone: a form's
-- tail keeps up to 255 rows between folds, and the whole tail is the
-- sum of every form's, thousands of rows in a schema of some forms,
-- millions in one of many. The insert trigger of a row a host's SQL
-- writes (or a node of an earlier version), whose seq is a multiple of
-- 256, and the update trigger of find_keys (0035, 0040) still folded
-- the whole tail (formsapi_fold_tail): each such statement folded every
-- form's rows at once, holding the fold's lock meanwhile, its cost that
-- of the whole tail (TestSearchHostFoldsOwnForm: 1,800 rows of 12 forms
-- for a host's update of one row). Here they fold their rows' forms'
-- tails (formsapi_fold_form_tail_to, at most 1,024 rows each since
-- 0042): an insert its row's form's up to its seq, as the store's
-- writes do; an update each of its new rows' forms'.
--
-- The bodies are 0035's (the insert's) and 0040's (the update's) but for
-- the fold they call.

CREATE OR REPLACE FUNCTION formsapi_submission_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean := formsapi_search_indexed();
    noted text := current_setting(formsapi_addition_setting(), true);
    n bigint := COALESCE(NULLIF(current_setting(formsapi_addition_count_setting(), true), '')::bigint, 1);
BEGIN
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, k, NEW.created_at, NEW.seq FROM unnest(NEW.find_keys) k
    WHERE k >= 0
    ON CONFLICT DO NOTHING;
    IF indexed AND NEW.find_keys IS NOT NULL THEN
        INSERT INTO formsapi_find_tail (form_seq, created_at, seq) VALUES (NEW.form_seq, NEW.created_at, NEW.seq)
        ON CONFLICT DO NOTHING;
        IF NEW.seq % 256 = 0 AND current_setting('transaction_isolation') = 'read committed'
            AND pg_try_advisory_xact_lock(formsapi_fold_lock()) THEN
            PERFORM formsapi_fold_form_tail_to(NEW.form_seq, NEW.seq);
        END IF;
    END IF;
    INSERT INTO formsapi_sort (form_seq, entry, created_at, seq)
    SELECT NEW.form_seq, k, NEW.created_at, NEW.seq FROM unnest(NEW.sort_keys) k
    ON CONFLICT DO NOTHING;
    IF noted IS NOT NULL AND noted <> '' AND EXISTS (
        SELECT 1 FROM formsapi_forms
        WHERE seq = NEW.form_seq AND NEW.feed_pos <= feed_last AND NEW.feed_pos > feed_last - n AND version = noted::bigint
    ) THEN
        RETURN NULL;
    END IF;
    UPDATE formsapi_forms SET version = formsapi_next_version(),
        base = CASE WHEN feed_last = NEW.feed_pos THEN base ELSE formsapi_next_version() END
    WHERE seq = NEW.form_seq;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_find_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.seq = o.seq WHERE o.find_keys IS DISTINCT FROM n.find_keys) THEN
        RETURN NULL;
    END IF;
    indexed := formsapi_search_indexed();
    IF indexed OR EXISTS (SELECT 1 FROM old_rows o WHERE 0 > ANY (o.find_keys)) THEN
        PERFORM 1 FROM formsapi_forms
        WHERE seq IN (SELECT form_seq FROM old_rows UNION SELECT form_seq FROM new_rows)
        ORDER BY seq FOR NO KEY UPDATE;
        PERFORM pg_advisory_xact_lock(formsapi_fold_lock());
    END IF;
    DELETE FROM formsapi_find_tail t USING old_rows o
    WHERE t.form_seq = o.form_seq AND t.created_at = o.created_at AND t.seq = o.seq;
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k WHERE k >= 0
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    IF indexed OR EXISTS (SELECT 1 FROM old_rows o WHERE 0 > ANY (o.find_keys)) THEN
        WITH d AS (
            SELECT o.form_seq, k AS key, o.created_at AS at, o.seq FROM old_rows o, unnest(o.find_keys) k WHERE k < 0
        ), g AS (
            SELECT d.form_seq, d.key, b.lo_at, b.lo_seq, array_agg(d.seq) AS gone
            FROM d CROSS JOIN LATERAL (
                SELECT lo_at, lo_seq FROM formsapi_find_blocks b
                WHERE b.form_seq = d.form_seq AND b.key = d.key AND (b.lo_at, b.lo_seq) <= (d.at, d.seq)
                ORDER BY b.lo_at DESC, b.lo_seq DESC LIMIT 1
            ) b
            GROUP BY d.form_seq, d.key, b.lo_at, b.lo_seq
        ), n AS MATERIALIZED (
            SELECT g.form_seq, g.key, g.lo_at, g.lo_seq, cardinality(b.seqs) AS had, x.ats, x.seqs
            FROM g JOIN formsapi_find_blocks b
                ON b.form_seq = g.form_seq AND b.key = g.key AND b.lo_at = g.lo_at AND b.lo_seq = g.lo_seq
            CROSS JOIN LATERAL (
                SELECT array_agg(u.a ORDER BY u.i) AS ats, array_agg(u.s ORDER BY u.i) AS seqs
                FROM unnest(b.ats, b.seqs) WITH ORDINALITY AS u (a, s, i) WHERE u.s <> ALL (g.gone)
            ) x
        ), w AS (
            UPDATE formsapi_find_blocks b SET ats = n.ats, seqs = n.seqs FROM n
            WHERE n.seqs IS NOT NULL AND cardinality(n.seqs) < n.had
                AND b.form_seq = n.form_seq AND b.key = n.key AND b.lo_at = n.lo_at AND b.lo_seq = n.lo_seq
        )
        DELETE FROM formsapi_find_blocks b USING n
        WHERE n.seqs IS NULL
            AND b.form_seq = n.form_seq AND b.key = n.key AND b.lo_at = n.lo_at AND b.lo_seq = n.lo_seq;
    END IF;
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    WHERE k >= 0
    ON CONFLICT DO NOTHING;
    IF indexed THEN
        INSERT INTO formsapi_find_tail (form_seq, created_at, seq)
        SELECT n.form_seq, n.created_at, n.seq FROM new_rows n WHERE 0 > ANY (n.find_keys)
        ON CONFLICT DO NOTHING;
        IF current_setting('transaction_isolation') = 'read committed' THEN
            PERFORM formsapi_fold_form_tail_to(f.form_seq, 9223372036854775807)
            FROM (SELECT DISTINCT form_seq FROM new_rows WHERE 0 > ANY (find_keys) ORDER BY form_seq) f;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
