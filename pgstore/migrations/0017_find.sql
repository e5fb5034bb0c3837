-- The index of submitted values that filters on submitted fields walk
-- (filter[<field>]=<value>; see internal/find). Each submission keeps, in
-- find_keys, the index keys of its top-level members that a filter can
-- name (find.Keys: a hash of the member's name and its value's canonical
-- JSON text), computed by the writer in Go; the triggers copy them into
-- formsapi_find, one entry per key, and remove them with the submission,
-- whoever deletes it. A filtered page walks the entries of one key of one
-- form in keyset order, so a filter costs its matches, not the form's
-- size. find_keys NULL is a row not indexed yet: the store indexes such
-- rows (stored before this migration, or inserted by SQL that does not
-- set the column) when it migrates, under the migration lock. Written to
-- run again over itself, as 0016 is.
ALTER TABLE formsapi_submissions ADD COLUMN IF NOT EXISTS find_keys bigint[];

CREATE INDEX IF NOT EXISTS formsapi_submissions_unindexed ON formsapi_submissions (seq) WHERE find_keys IS NULL;

CREATE TABLE IF NOT EXISTS formsapi_find (
    form_seq   bigint NOT NULL,
    key        bigint NOT NULL,
    created_at bigint NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (form_seq, key, created_at, seq)
);

CREATE OR REPLACE FUNCTION formsapi_find_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_find_insert ON formsapi_submissions;
CREATE TRIGGER formsapi_find_insert AFTER INSERT ON formsapi_submissions
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION formsapi_find_insert();

CREATE OR REPLACE FUNCTION formsapi_find_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_find_delete ON formsapi_submissions;
CREATE TRIGGER formsapi_find_delete AFTER DELETE ON formsapi_submissions
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION formsapi_find_delete();

-- An update that sets find_keys (the store's indexing of rows without
-- them) moves the entries: the old ones go, the new ones come.
CREATE OR REPLACE FUNCTION formsapi_find_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM formsapi_find f USING (
        SELECT o.form_seq, k, o.created_at, o.seq FROM old_rows o, unnest(o.find_keys) k
    ) d (form_seq, key, created_at, seq)
    WHERE f.form_seq = d.form_seq AND f.key = d.key AND f.created_at = d.created_at AND f.seq = d.seq;
    INSERT INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT n.form_seq, k, n.created_at, n.seq FROM new_rows n, unnest(n.find_keys) k
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_find_update ON formsapi_submissions;
CREATE TRIGGER formsapi_find_update AFTER UPDATE ON formsapi_submissions
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION formsapi_find_update();

CREATE OR REPLACE FUNCTION formsapi_find_truncated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    TRUNCATE formsapi_find;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS formsapi_find_truncate ON formsapi_submissions;
CREATE TRIGGER formsapi_find_truncate AFTER TRUNCATE ON formsapi_submissions
FOR EACH STATEMENT EXECUTE FUNCTION formsapi_find_truncated();
