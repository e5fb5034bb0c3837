-- A write folds at most 1,024 rows of its form's tail (issue 37).
--
-- formsapi_fold_form_tail_to (0038) folded every row of the form's tail
-- it saw, in the write whose turn it was, which holds the form's row
-- meanwhile. A tail is near 256 rows while folds run, but grows while
-- they cannot: every fold finds the fold's lock held while a long
-- deletion runs (a form's deletion, a purge), or, before pgstore made its
-- single writes at read committed where the default isolation is
-- stricter, no single write folded at all. The write that came next
-- then folded all of it, its cost the fold's share of a write's for
-- every row (a write with the index on costs some 0.5 ms of PostgreSQL's
-- CPU in a bulk ingest, docs/stores.md), every writer to the form
-- waiting for it; under a statement_timeout shorter than that the write
-- failed, and so did every later write whose turn it was, the tail
-- rolled back each time (TestSearchTailFoldBounded: 3,008 rows in one
-- write before).
--
-- Here a fold takes the form's oldest 1,024 rows (by the tail's primary
-- key) it would have taken: a tail of 256 as before, a longer one 1,024
-- at a time, by the writes whose feed positions are multiples of 16
-- while the form's tail holds 256 rows or more (64 rows a write, where a
-- write adds one).
--
-- The body is 0038's but for the rows it takes; TestFoldBodies keeps it
-- the same as the whole tail's fold otherwise.

CREATE OR REPLACE FUNCTION formsapi_fold_form_tail_to(form bigint, last bigint) RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT SET jit = off AS $$
    WITH t AS (
        DELETE FROM formsapi_find_tail
        WHERE (form_seq, created_at, seq) IN (
            SELECT form_seq, created_at, seq FROM formsapi_find_tail
            WHERE form_seq = form AND (seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid))
            ORDER BY form_seq, created_at, seq LIMIT 1024
        )
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
