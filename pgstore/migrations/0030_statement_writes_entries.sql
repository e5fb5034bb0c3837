-- The store's own insert writes its submissions' index entries itself
-- (issue 37), as 0018 made it give the form's version itself. Per write,
-- the statement-level triggers of 0017 and 0028 (a PL/pgSQL call each,
-- with a transition table, and the search setting's check and shared
-- lock) and the row trigger that notes the form's version cost about as
-- much as the insert (BENCHMARKS.md, "The index's write cost").
--
-- AddSubmission's and AddSubmissions's statements call
-- formsapi_addition(n, search, sorted) once: it checks the search and
-- sort settings under their locks (below), refuses the write (a NULL
-- version) when the writer left out keys an index that is on needs,
-- gives the version, and marks the transaction as the store's: the
-- setting formsapi.written, local to it. The statement then inserts the
-- submissions, their filter entries (find_keys' keys that are not
-- negative) into formsapi_find, their rows into the search index's tail
-- (formsapi_find_tail, 0023) while that index is on, their sort entries
-- into formsapi_sort, and the form's row of the change log (0025), in
-- data-modifying parts of the same statement.
--
-- The insert trigger runs only for rows of a transaction without the
-- mark (its WHEN reads the setting: no function call of ours, where a
-- WHEN may hold no subquery): a host's own SQL, or a node of an earlier
-- version during a rolling deploy, whose statements leave the entries to
-- the triggers. For such
-- a row it does what the triggers it replaces did, a row at a time: the
-- filter entries, the tail row and its fold, the sort entries, and the
-- form's version (0024's test of the noted addition, else a fresh
-- version, and a fresh base unless the row is at the feed's end). A
-- multi-row insert of a host's SQL so pays a trigger call a row where it
-- paid one a statement; nothing else changes for it.
--
-- The fold (0023, 0024): a marked row whose seq is a multiple of 64 folds
-- the tail (its own trigger, under pg_try_advisory_xact_lock of
-- formsapi_fold_lock(), while the search index is on), but for the rows
-- its own transaction put there with a seq above its own: after a
-- statement of many submissions, the tail holds what that many single
-- writes leave, as 0024 did.
--
-- The mark is local to the transaction, and the store's transactions
-- that write submissions hold nothing but the store's statements: no
-- row of a host's SQL is ever in one. A host's SQL must not set
-- formsapi.written.
--
-- The foreign key from formsapi_submissions to formsapi_forms stays: its
-- check costs a write about a tenth of a millisecond of PostgreSQL's
-- CPU, and it is what keeps a host's SQL (and a form deleted while a
-- write waits) from leaving submissions of no form; a trigger of ours
-- in its place would be the same check, less tested.
--
-- Written to run again over itself, as 0016 to 0028 are.

-- The store's check, version and mark for a statement that adds n
-- submissions: search and sorted say whether the writer computed
-- search's trigram keys and the sort keys. version is NULL when the
-- statement must write nothing (an index is on whose keys the writer left
-- out); indexed whether the search index is on.
--
-- It takes the search lock shared, and the sort lock when the writer left
-- the sort keys out, before it reads the settings, once, in one statement:
-- formsapi_search_indexed() and formsapi_sort_indexed() (0021, 0028) read
-- a setting, and took the lock and read it again only when it was off;
-- taking it first costs a write less (an advisory lock is taken in
-- memory), and turning an index on, which takes it exclusively, waits
-- for this write either way. At repeatable read or serializable the
-- settings' rows are locked FOR SHARE, as there.
--
-- The function has no SET search_path (PostgreSQL's save and restore of
-- the setting, and the search path computed again, on every call, were
-- a sixth of a write's CPU with the rest of this migration): its body
-- names this schema's tables, and the locks' keys, as written when the
-- migration ran.
DO $do$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION %1$I.formsapi_addition(n bigint, search boolean, sorted boolean, OUT version bigint, OUT indexed boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ordered boolean;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(%2$s);
    IF NOT sorted THEN
        PERFORM pg_advisory_xact_lock_shared(%3$s);
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM %1$I.formsapi_settings
        WHERE name = 'search_index' OR name = 'sort_index' AND NOT sorted
        FOR SHARE;
    END IF;
    SELECT coalesce(bool_or(name = 'search_index'), false), coalesce(bool_or(name = 'sort_index'), false)
    INTO indexed, ordered
    FROM %1$I.formsapi_settings WHERE name IN ('search_index', 'sort_index') AND value = 1;
    IF (indexed AND NOT search) OR (ordered AND NOT sorted) THEN
        RETURN;
    END IF;
    version := nextval(%4$L::regclass) * 65536 + floor(random() * 65536)::bigint;
    PERFORM set_config('formsapi.written', '1', true);
END
$$$f$, current_schema(),
        hashtextextended('formsapi search index ' || current_schema(), 0),
        hashtextextended('formsapi sort index ' || current_schema(), 0),
        format('%I.formsapi_versions', current_schema()));
END
$do$;

-- The fold of a marked row at seq last: every tail row this transaction
-- sees but its own above last.
CREATE OR REPLACE FUNCTION formsapi_fold_tail_to(last bigint) RETURNS void LANGUAGE sql VOLATILE
SET search_path FROM CURRENT AS $$
    WITH t AS (
        DELETE FROM formsapi_find_tail
        WHERE seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid)
        RETURNING seq
    )
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT s.form_seq, k, s.created_at, s.seq
    FROM t JOIN formsapi_submissions s ON s.seq = t.seq, unnest(s.find_keys) k
    WHERE k < 0
    ORDER BY 1, 2, 3, 4
    ON CONFLICT DO NOTHING
$$;

CREATE OR REPLACE FUNCTION formsapi_submission_folds() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM formsapi_settings WHERE name = 'search_index' AND value = 1)
        AND pg_try_advisory_xact_lock(hashtextextended('formsapi find fold ' || current_schema(), 0)) THEN
        PERFORM formsapi_fold_tail_to(NEW.seq);
    END IF;
    RETURN NULL;
END
$$;

-- A row of a transaction without the mark: the triggers of 0017 to 0028,
-- a row at a time.
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
        IF NEW.seq % 64 = 0 AND pg_try_advisory_xact_lock(formsapi_fold_lock()) THEN
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

DROP TRIGGER IF EXISTS formsapi_find_insert ON formsapi_submissions;
DROP TRIGGER IF EXISTS formsapi_sort_insert ON formsapi_submissions;
DROP TRIGGER IF EXISTS formsapi_submissions_insert_version ON formsapi_submissions;
DROP TRIGGER IF EXISTS formsapi_submissions_insert ON formsapi_submissions;
DROP TRIGGER IF EXISTS formsapi_submissions_fold ON formsapi_submissions;

CREATE TRIGGER formsapi_submissions_insert AFTER INSERT ON formsapi_submissions
FOR EACH ROW WHEN (current_setting('formsapi.written', true) IS DISTINCT FROM '1')
EXECUTE FUNCTION formsapi_submission_inserted();

CREATE TRIGGER formsapi_submissions_fold AFTER INSERT ON formsapi_submissions
FOR EACH ROW WHEN (current_setting('formsapi.written', true) IS NOT DISTINCT FROM '1' AND NEW.seq % 64 = 0 AND NEW.find_keys IS NOT NULL)
EXECUTE FUNCTION formsapi_submission_folds();

-- The change log's row of the form (0025) is written by the store's
-- statement too, beside its update of the form's row (the same upsert
-- as formsapi_change, after the form's row lock, as the trigger took
-- it): the trigger, two PL/pgSQL calls a write, runs for the updates
-- of a transaction without the mark.
CREATE OR REPLACE TRIGGER formsapi_forms_updated AFTER UPDATE ON formsapi_forms
FOR EACH ROW WHEN ((OLD.id, OLD.account_id, OLD.seq, OLD.version, OLD.incarnation)
    IS DISTINCT FROM (NEW.id, NEW.account_id, NEW.seq, NEW.version, NEW.incarnation)
    AND current_setting('formsapi.written', true) IS DISTINCT FROM '1')
EXECUTE FUNCTION formsapi_forms_changed();
