-- Additions of many submissions to a form in one statement (issue 37):
-- AddSubmissions moves a form's feed_last by n and gives its version once,
-- then inserts the n submissions at positions feed_last-n+1 to feed_last
-- in the same statement. Before, it sent AddSubmission's statement once
-- per submission: each updated the form's row again, so a batch of 1,000
-- left about 1,000 dead versions of that row, which every later write to
-- the form read past until a vacuum (bench/ingest.sh slowed down without
-- end on a server with autovacuum off).
--
-- formsapi_addition_version(n) notes, beside the version it gives (0018),
-- how many submissions the statement added (a second setting local to the
-- transaction). The insert's row trigger leaves the form alone, as an
-- addition, when the submission's feed_pos is one of those n positions,
-- the last n up to the form's feed_last, and the form's version is the
-- value noted: each row of such a statement is an addition at the end of
-- the feed (base stays, as 0016 says), and version was given once, for
-- all of them. AddSubmission's statement calls the function without an
-- argument, which takes one position: the trigger's test is then 0018's
-- (feed_pos = feed_last). Anything else takes 0016's update, as before.
--
-- The search index's tail (0023) is left as the single statements leave
-- it too: a single write whose seq is a multiple of 64 folds the tail,
-- and the writes after it add to the tail again. A statement of many
-- submissions, when one of its seqs is a multiple of 64, folds the tail
-- but for its own rows after the last such seq, which stay in the tail,
-- as they would after that many single writes. (The search's estimate,
-- which counts the tail's rows, reads the tail: the same writes give the
-- same estimate, whichever way they were made.) A statement of one
-- submission folds the whole tail, as before.
--
-- Written to run again over itself, as 0016 to 0023 are.

CREATE OR REPLACE FUNCTION formsapi_addition_count_setting() RETURNS text LANGUAGE sql STABLE
SET search_path FROM CURRENT AS $$
    SELECT 'formsapi.added_count_' || md5(current_schema())
$$;

CREATE OR REPLACE FUNCTION formsapi_addition_version(n bigint) RETURNS bigint LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT AS $$
DECLARE
    v bigint := formsapi_next_version();
BEGIN
    PERFORM set_config(formsapi_addition_setting(), v::text, true);
    PERFORM set_config(formsapi_addition_count_setting(), n::text, true);
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_addition_version() RETURNS bigint LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    SELECT formsapi_addition_version(1)
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    noted text := current_setting(formsapi_addition_setting(), true);
    n bigint := COALESCE(NULLIF(current_setting(formsapi_addition_count_setting(), true), '')::bigint, 1);
BEGIN
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

-- The fold (0023's), but for the tail rows whose seqs keep holds.
CREATE OR REPLACE FUNCTION formsapi_fold_tail(keep bigint[]) RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    WITH t AS (DELETE FROM formsapi_find_tail WHERE seq <> ALL (keep) RETURNING seq)
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
    last bigint;
BEGIN
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    WHERE k >= 0
    ON CONFLICT DO NOTHING;
    IF indexed THEN
        INSERT INTO formsapi_find_tail (form_seq, created_at, seq)
        SELECT n.form_seq, n.created_at, n.seq FROM new_rows n WHERE n.find_keys IS NOT NULL
        ON CONFLICT DO NOTHING;
        SELECT max(n.seq) INTO last FROM new_rows n WHERE n.seq % 64 = 0 AND n.find_keys IS NOT NULL;
        IF last IS NOT NULL AND pg_try_advisory_xact_lock(formsapi_fold_lock()) THEN
            PERFORM formsapi_fold_tail(ARRAY(SELECT n.seq FROM new_rows n WHERE n.seq > last));
        END IF;
    END IF;
    RETURN NULL;
END
$$;
