-- An update of find_keys takes its forms' rows before the fold's lock
-- (issue 37).
--
-- A deletion takes its form's row (the tombstone's feed position,
-- migration 0026's row trigger) before its statement trigger waits for
-- formsapi_fold_lock(); a form's deletion locks the form's row first
-- too. An update of find_keys took the fold's lock first (0035, 0039)
-- and its forms' rows after, in the version trigger
-- (formsapi_submissions_updated, which runs after it): an update that
-- held the lock while a deletion on one of its forms held the form's
-- row and waited for the lock then waited for that row, and PostgreSQL
-- ended the deadlock after a second by aborting one of them with 40P01
-- (TestSearchBlocksUpdateBesideDeletion). Here the update locks the
-- rows first, in the mode the version trigger's update takes (FOR NO
-- KEY UPDATE), in the order of their seq, then the fold's lock.
--
-- The body is 0039's but for that.

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
            PERFORM formsapi_fold_tail();
        END IF;
    END IF;
    RETURN NULL;
END
$$;
