-- Search's trigram entries are folded into formsapi_find in batches, not
-- inserted by every write (issue 37). A write with the search index on
-- inserted each of its hundred or more trigram entries into formsapi_find,
-- each a B-tree insertion of its own: it cost PostgreSQL 4 times the CPU
-- a write did before the index (bench/writecost.sh). Entries of many
-- writes sorted together share their trigrams' pages.
--
-- While the search index is on, a write inserts its filter entries (the
-- non-negative keys) as before, and puts the submission in
-- formsapi_find_tail, the unfolded tail, instead of its trigram entries.
-- A write whose seq is a multiple of 64 folds the tail, unless another
-- transaction is folding it (a try of the advisory lock
-- formsapi_fold_lock() names): the rows of the tail it sees, committed
-- ones and its own, are deleted and their trigram entries inserted,
-- sorted, in its transaction. So every committed submission has either
-- its trigram entries in formsapi_find or its row in the tail, never
-- both, and a search that walks a trigram's entries walks the form's
-- tail beside them, in the same statement and order, checking each of
-- its rows as it checks an entry's submission: it sees every submission
-- committed before it. The tail holds about 64 rows, more while writes
-- fail or a fold is under way. A filter walks its own entries, which
-- every write still inserts at once.
--
-- An update of find_keys (the store's indexing of rows without them)
-- takes the row out of the tail first and indexes its trigrams at once,
-- as before; a deletion takes its tail row, then its entries (so a fold
-- that took the row first has its entries deleted too). The tail is
-- empty while the search index is off (nothing is put in it), so turning
-- the index on, which indexes every stored row at once, finds it empty.
--
-- Written to run again over itself, as 0016 to 0022 are.

CREATE TABLE IF NOT EXISTS formsapi_find_tail (
    form_seq   bigint NOT NULL,
    created_at bigint NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (form_seq, created_at, seq)
);

CREATE OR REPLACE FUNCTION formsapi_fold_lock() RETURNS bigint LANGUAGE sql STABLE
SET search_path FROM CURRENT AS $$
    SELECT hashtextextended('formsapi find fold ' || current_schema(), 0)
$$;

-- The fold: the trigram entries of every tail row this transaction sees,
-- into formsapi_find.
CREATE OR REPLACE FUNCTION formsapi_fold_tail() RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    WITH t AS (DELETE FROM formsapi_find_tail RETURNING seq)
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT s.form_seq, k, s.created_at, s.seq
    FROM t JOIN formsapi_submissions s ON s.seq = t.seq, unnest(s.find_keys) k
    WHERE k < 0
    ORDER BY 1, 2, 3, 4
    ON CONFLICT DO NOTHING
$$;

CREATE OR REPLACE FUNCTION formsapi_find_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean := formsapi_search_indexed();
BEGIN
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    WHERE k >= 0
    ON CONFLICT DO NOTHING;
    IF indexed THEN
        INSERT INTO formsapi_find_tail (form_seq, created_at, seq)
        SELECT n.form_seq, n.created_at, n.seq FROM new_rows n WHERE n.find_keys IS NOT NULL
        ON CONFLICT DO NOTHING;
        IF EXISTS (SELECT 1 FROM new_rows n WHERE n.seq % 64 = 0 AND n.find_keys IS NOT NULL)
            AND pg_try_advisory_xact_lock(formsapi_fold_lock()) THEN
            PERFORM formsapi_fold_tail();
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_find_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    indexed boolean := formsapi_search_indexed();
BEGIN
    DELETE FROM formsapi_find_tail t USING old_rows o
    WHERE t.form_seq = o.form_seq AND t.created_at = o.created_at AND t.seq = o.seq;
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

CREATE OR REPLACE FUNCTION formsapi_find_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM formsapi_search_indexed();
    DELETE FROM formsapi_find_tail t USING old_rows o
    WHERE t.form_seq = o.form_seq AND t.created_at = o.created_at AND t.seq = o.seq;
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_find_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    TRUNCATE formsapi_find, formsapi_find_tail;
    RETURN NULL;
END
$$;
