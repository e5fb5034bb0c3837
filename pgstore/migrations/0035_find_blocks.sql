-- Search's trigram entries are kept as posting blocks, as SQLite's are
-- since its migration 0022 (issue 37). Migration 0023 folded a write's
-- hundred-odd trigram entries in batches of 64 writes, but each entry was
-- still a B-tree entry of formsapi_find, a descent and a WAL record each:
-- the fold was most of what the search index added to a write
-- (BENCHMARKS.md, "PostgreSQL's posting blocks, a prototype of the
-- write").
--
-- formsapi_find_blocks holds, per form and trigram key, the key's entries
-- in blocks: each row is one block, named by its first entry when written
-- (lo_at, lo_seq), its entries sorted by (created_at, seq) in two arrays
-- of the same length (ats, seqs), at most 56, never none (a block left
-- empty goes). The blocks of a key partition its keyset range: an entry
-- is in the last block whose name is at or before it, so a walk reads the
-- blocks in the order of their names and each block's lists in order,
-- whatever order the entries were written in: a late commit (created_at
-- earlier than entries already folded) goes into the block of its place.
-- Once its first entry is deleted, a block's name stays the lower bound
-- of its entries, which is all the fold and the walks rely on.
-- formsapi_find keeps the filters' entries (non-negative keys) only.
--
-- The fold (formsapi_fold_tail_to, called as 0030's by the store's
-- writes, now those whose seq is a multiple of 256, and by a host's rows)
-- merges each distinct trigram's new entries into its blocks in one
-- statement: usually appended to the key's last block, cut into blocks of
-- 56 (the last block updated, the others inserted); a key with an entry
-- before its last block's last entry goes the general way (each entry's
-- block found, merged, ranked and cut, a first block renamed when an
-- entry comes before it). So a fold writes a row per distinct trigram of
-- 256 writes, not a row per entry.
--
-- Every writer of blocks holds formsapi_fold_lock() exclusively until it
-- commits: a fold tries it (and leaves the tail to the next fold when it
-- is taken), a deletion and an update of find_keys wait for it. A block's
-- new lists are computed from the lists a statement read, and a writer
-- that computed them from a snapshot older than another's commit would
-- undo that commit's change to the block. A fold runs at read committed
-- only; at repeatable read or serializable, whose snapshot may predate
-- the lock, the tail waits for the next fold (a deletion at those levels
-- fails with 40001 on a block changed since its snapshot, as any update
-- of a row changed concurrently).
--
-- A deletion takes its row's entries out of their blocks (each entry's
-- block found by one descent, written through its primary key; a block
-- left empty goes). An update of find_keys takes the old entries out the
-- same way and puts the row in the tail while the search index is on,
-- then folds. TRUNCATE empties the blocks too.
--
-- Written to run again over itself.

CREATE TABLE IF NOT EXISTS formsapi_find_blocks (
    form_seq bigint   NOT NULL,
    key      bigint   NOT NULL,
    lo_at    bigint   NOT NULL,
    lo_seq   bigint   NOT NULL,
    ats      bigint[] NOT NULL,
    seqs     bigint[] NOT NULL,
    PRIMARY KEY (form_seq, key, lo_at, lo_seq)
) WITH (fillfactor = 50);

-- The trigram entries stored so far, 56 to a block, in one pass of
-- formsapi_find's primary key.
INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
SELECT form_seq, key, ats[1], seqs[1], ats, seqs FROM (
    SELECT form_seq, key, b, array_agg(created_at ORDER BY created_at, seq) AS ats, array_agg(seq ORDER BY created_at, seq) AS seqs
    FROM (
        SELECT form_seq, key, created_at, seq,
            (row_number() OVER (PARTITION BY form_seq, key ORDER BY created_at, seq) - 1) / 56 AS b
        FROM formsapi_find WHERE key < 0
    ) e
    GROUP BY form_seq, key, b
) g
ON CONFLICT DO NOTHING;

DELETE FROM formsapi_find WHERE key < 0;

-- 0023's and 0024's folds, and 0024's insert trigger's function, which
-- no trigger calls since 0030.
DROP FUNCTION IF EXISTS formsapi_fold_tail(bigint[]);
DROP FUNCTION IF EXISTS formsapi_find_insert();

-- The fold of a marked row at seq last (0030's, into blocks): every tail
-- row this transaction sees but its own above last.
CREATE OR REPLACE FUNCTION formsapi_fold_tail_to(last bigint) RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    WITH t AS (
        DELETE FROM formsapi_find_tail
        WHERE seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid)
        RETURNING seq
    ), e AS MATERIALIZED (
        SELECT DISTINCT s.form_seq, k AS key, s.created_at AS at, s.seq
        FROM t JOIN formsapi_submissions s ON s.seq = t.seq, unnest(s.find_keys) k
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
        FROM (SELECT DISTINCT form_seq, key, tlo_at, tlo_seq FROM eb) n
        JOIN formsapi_find_blocks b ON b.form_seq = n.form_seq AND b.key = n.key AND b.lo_at = n.tlo_at AND b.lo_seq = n.tlo_seq,
        unnest(b.ats, b.seqs) x (at, seq)
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
    )
    INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
    SELECT form_seq, key, ats[1], seqs[1], ats, seqs FROM ch
    WHERE NOT (ch.chunk = 0 AND ch.ats[1] = ch.tlo_at AND ch.seqs[1] = ch.tlo_seq)
$$;

-- The whole tail this transaction sees.
CREATE OR REPLACE FUNCTION formsapi_fold_tail() RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    SELECT formsapi_fold_tail_to(9223372036854775807)
$$;

CREATE OR REPLACE FUNCTION formsapi_submission_folds() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed'
        AND EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1)
        AND pg_try_advisory_xact_lock(hashtextextended('formsapi find fold ' || current_schema(), 0)) THEN
        PERFORM formsapi_fold_tail_to(NEW.seq);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_submissions_fold ON formsapi_submissions;
CREATE TRIGGER formsapi_submissions_fold AFTER INSERT ON formsapi_submissions
FOR EACH ROW WHEN (current_setting('formsapi.written', true) IS NOT DISTINCT FROM '1' AND NEW.seq % 256 = 0 AND NEW.find_keys IS NOT NULL)
EXECUTE FUNCTION formsapi_submission_folds();

-- A row of a transaction without the mark (0030's): the tail is folded
-- by a row whose seq is a multiple of 256.
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
            PERFORM formsapi_fold_tail();
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

-- The deletion's and the update's: the trigram entries of old_rows out
-- of their blocks, under the fold's lock (taken before).

CREATE OR REPLACE FUNCTION formsapi_find_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_search_indexed();
    DELETE FROM formsapi_find_tail t USING old_rows o
    WHERE t.form_seq = o.form_seq AND t.created_at = o.created_at AND t.seq = o.seq;
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k WHERE k >= 0
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    IF EXISTS (SELECT 1 FROM old_rows o WHERE 0 > ANY (o.find_keys)) THEN
        PERFORM pg_advisory_xact_lock(formsapi_fold_lock());
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
    RETURN NULL;
END
$$;

-- 0028's, with the trigram entries in blocks: the old ones out, and the
-- row in the tail while the search index is on, folded at once.
CREATE OR REPLACE FUNCTION formsapi_find_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.seq = o.seq WHERE o.find_keys IS DISTINCT FROM n.find_keys) THEN
        RETURN NULL;
    END IF;
    indexed := formsapi_search_indexed();
    DELETE FROM formsapi_find_tail t USING old_rows o
    WHERE t.form_seq = o.form_seq AND t.created_at = o.created_at AND t.seq = o.seq;
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k WHERE k >= 0
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    IF indexed OR EXISTS (SELECT 1 FROM old_rows o WHERE 0 > ANY (o.find_keys)) THEN
        PERFORM pg_advisory_xact_lock(formsapi_fold_lock());
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

CREATE OR REPLACE FUNCTION formsapi_find_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    TRUNCATE formsapi_find, formsapi_find_tail, formsapi_find_blocks;
    RETURN NULL;
END
$$;
