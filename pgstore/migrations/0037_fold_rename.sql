-- The fold's renamed blocks go before the blocks it inserts (issue 37).
--
-- formsapi_fold_tail_to (0035, 0036) merges a key's late entries (before
-- its last block's last entry) into the block of their place, the first
-- block for entries before every block. When one comes before the
-- block's first entry, the merged list's first chunk has a new name: the
-- block goes (d) and each chunk is inserted under its first entry. With
-- exactly 56, 112, ... entries before the block's first entry, a later
-- chunk starts with that entry, and so has the block's own name. The
-- sub-statements of one statement run in no given order, and PostgreSQL
-- ran the main INSERT before the unread DELETE: the insert found the
-- block still there and failed with a unique violation (23505). The
-- fold is part of the write whose seq is a multiple of 256, so that
-- write failed (the store took it for a metadata ID the form already
-- has, invalid input), and so did every later fold while the tail held
-- those entries (TestSearchBlocksLateChunkNamedAsBlock); so did turning
-- the search index on over rows whose created_at goes back as their seq
-- grows (its folds of 2,000 rows).
--
-- Here the INSERT reads the DELETE's rows (a count, always true), so the
-- DELETE runs to its end before the first row is inserted, and the
-- chunk that takes the block's name is inserted after the block went.
--
-- The body is 0036's but for that.

CREATE OR REPLACE FUNCTION formsapi_fold_tail_to(last bigint) RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT SET jit = off AS $$
    WITH t AS (
        DELETE FROM formsapi_find_tail
        WHERE seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid)
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
