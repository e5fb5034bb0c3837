-- A write folds its own form's tail (issue 37).
--
-- The store's writes folded the whole tail at every 256th submission
-- (0035's trigger, NEW.seq % 256 = 0). Writes spread over many forms
-- then gave each fold an entry or two for each of thousands of keys of
-- hundreds of forms, each the rewrite of a block on a page of its own:
-- 2.6 times the PostgreSQL CPU of a write to one form (bench/mixed.sh's
-- writer over 200 forms, 3.3 ms a write against 1.3). A search reads
-- one form's tail, so it is the form's tail that needs to stay small:
-- here a write whose position in its form's feed is a multiple of 16
-- counts its form's tail rows up to its own (those the fold would
-- take: a batch's statement has put its later rows in the tail
-- already; 256 at most are counted), and folds that form's rows once
-- they are 256, under the fold's lock as before. A form's tail thus
-- stays near 256 rows (a count every 16 positions of its feed, whose
-- deletions take some: the next multiple counts; a fold that finds the
-- lock held is left to a later count), and a fold's blocks are one
-- form's: together on their pages. (The seq, the store's order of
-- insertion, would not do: a writer taking forms in turn, two of them,
-- gives one form every even seq and the other none.)

-- The fold's body is 0037's but for the form in its first part (the
-- tail's rows it takes); TestFoldBodies keeps the two the same
-- otherwise. The whole tail is still folded where it was (an insert
-- outside the store's writes, the build), by formsapi_fold_tail.

CREATE OR REPLACE FUNCTION formsapi_fold_form_tail_to(form bigint, last bigint) RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT SET jit = off AS $$
    WITH t AS (
        DELETE FROM formsapi_find_tail
        WHERE form_seq = form AND (seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid))
        RETURNING seq
    ), e AS MATERIALIZED (
        SELECT DISTINCT s.form_seq, k AS key, s.created_at AS at, s.seq
        FROM t, LATERAL (
            SELECT form_seq, created_at, seq, find_keys FROM formsapi_submissions WHERE seq = t.seq LIMIT 1
        ) s, unnest(s.find_keys) k
        WHERE k < 0
    ), g AS (
        SELECT form_seq, key, array_agg(at ORDER BY at, seq) AS ats, array_agg(seq ORDER BY at, seq) AS seqs
        FROM e GROUP BY form_seq, key
    ), j AS MATERIALIZED (
        SELECT g.form_seq, g.key, g.ats, g.seqs, b.lo_at, b.lo_seq, b.ats AS oats, b.seqs AS oseqs,
            b.lo_at IS NULL OR (g.ats[1], g.seqs[1]) > (b.ats[cardinality(b.ats)], b.seqs[cardinality(b.seqs)]) AS fast
        FROM g LEFT JOIN LATERAL (
            SELECT lo_at, lo_seq, ats, seqs FROM formsapi_find_blocks b
            WHERE b.form_seq = g.form_seq AND b.key = g.key
            ORDER BY lo_at DESC, lo_seq DESC LIMIT 1
        ) b ON true
    ), f AS (
        SELECT form_seq, key, lo_at, lo_seq, coalesce(cardinality(oats), 0) AS had,
            coalesce(oats, '{}') || ats AS ats, coalesce(oseqs, '{}') || seqs AS seqs
        FROM j WHERE fast
    ), fc AS MATERIALIZED (
        SELECT f.form_seq, f.key, f.lo_at, f.lo_seq, f.had, i, f.ats[i * 56 + 1 : i * 56 + 56] AS ats, f.seqs[i * 56 + 1 : i * 56 + 56] AS seqs
        FROM f, generate_series(0, (cardinality(f.ats) - 1) / 56) i
    ), fu AS (
        UPDATE formsapi_find_blocks b SET ats = fc.ats, seqs = fc.seqs
        FROM fc
        WHERE fc.i = 0 AND fc.lo_at IS NOT NULL AND fc.had < 56
            AND b.form_seq = fc.form_seq AND b.key = fc.key AND b.lo_at = fc.lo_at AND b.lo_seq = fc.lo_seq
    ), fi AS (
        INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
        SELECT form_seq, key, ats[1], seqs[1], ats, seqs FROM fc
        WHERE NOT (fc.i = 0 AND fc.lo_at IS NOT NULL)
    ), es AS (
        SELECT e.* FROM e JOIN j ON j.form_seq = e.form_seq AND j.key = e.key AND NOT j.fast
    ), eb AS MATERIALIZED (
        SELECT e.form_seq, e.key, e.at, e.seq, coalesce(p.lo_at, f.lo_at) AS tlo_at, coalesce(p.lo_seq, f.lo_seq) AS tlo_seq
        FROM es e
        LEFT JOIN LATERAL (
            SELECT b.lo_at, b.lo_seq FROM formsapi_find_blocks b
            WHERE b.form_seq = e.form_seq AND b.key = e.key AND (b.lo_at, b.lo_seq) <= (e.at, e.seq)
            ORDER BY b.lo_at DESC, b.lo_seq DESC LIMIT 1
        ) p ON true
        LEFT JOIN LATERAL (
            SELECT b.lo_at, b.lo_seq FROM formsapi_find_blocks b
            WHERE b.form_seq = e.form_seq AND b.key = e.key
            ORDER BY b.lo_at, b.lo_seq LIMIT 1
        ) f ON true
    ), m AS (
        SELECT n.form_seq, n.key, n.tlo_at, n.tlo_seq, x.at, x.seq
        FROM (SELECT DISTINCT form_seq, key, tlo_at, tlo_seq FROM eb) n, LATERAL (
            SELECT b.ats, b.seqs FROM formsapi_find_blocks b
            WHERE b.form_seq = n.form_seq AND b.key = n.key AND b.lo_at = n.tlo_at AND b.lo_seq = n.tlo_seq LIMIT 1
        ) b, unnest(b.ats, b.seqs) x (at, seq)
        UNION ALL
        SELECT form_seq, key, tlo_at, tlo_seq, at, seq FROM eb
    ), c AS (
        SELECT form_seq, key, tlo_at, tlo_seq, at, seq,
            (row_number() OVER (PARTITION BY form_seq, key, tlo_at, tlo_seq ORDER BY at, seq) - 1) / 56 AS chunk
        FROM m
    ), ch AS MATERIALIZED (
        SELECT form_seq, key, tlo_at, tlo_seq, chunk,
            array_agg(at ORDER BY at, seq) AS ats, array_agg(seq ORDER BY at, seq) AS seqs
        FROM c GROUP BY form_seq, key, tlo_at, tlo_seq, chunk
    ), u AS (
        UPDATE formsapi_find_blocks b SET ats = ch.ats, seqs = ch.seqs
        FROM ch
        WHERE ch.chunk = 0 AND ch.ats[1] = ch.tlo_at AND ch.seqs[1] = ch.tlo_seq
            AND b.form_seq = ch.form_seq AND b.key = ch.key AND b.lo_at = ch.tlo_at AND b.lo_seq = ch.tlo_seq
    ), d AS (
        DELETE FROM formsapi_find_blocks b USING ch
        WHERE ch.chunk = 0 AND (ch.ats[1], ch.seqs[1]) <> (ch.tlo_at, ch.tlo_seq)
            AND b.form_seq = ch.form_seq AND b.key = ch.key AND b.lo_at = ch.tlo_at AND b.lo_seq = ch.tlo_seq
        RETURNING 1
    )
    INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
    SELECT form_seq, key, ats[1], seqs[1], ats, seqs FROM ch
    WHERE NOT (ch.chunk = 0 AND ch.ats[1] = ch.tlo_at AND ch.seqs[1] = ch.tlo_seq)
        AND (SELECT count(*) FROM d) >= 0
$$;

CREATE OR REPLACE FUNCTION formsapi_submission_folds() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed'
        AND EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1)
        AND (SELECT count(*) FROM (
            SELECT FROM formsapi_find_tail WHERE form_seq = NEW.form_seq AND seq <= NEW.seq LIMIT 256
        ) r) >= 256
        AND pg_try_advisory_xact_lock(formsapi_fold_lock()) THEN
        PERFORM formsapi_fold_form_tail_to(NEW.form_seq, NEW.seq);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_submissions_fold ON formsapi_submissions;
CREATE TRIGGER formsapi_submissions_fold AFTER INSERT ON formsapi_submissions
FOR EACH ROW WHEN (current_setting('formsapi.written', true) IS NOT DISTINCT FROM '1' AND NEW.feed_pos % 16 = 0 AND NEW.find_keys IS NOT NULL)
EXECUTE FUNCTION formsapi_submission_folds();
