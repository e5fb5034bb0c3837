-- A deletion that a following node can splice into the pages it holds
-- (issue 38, docs/fleet.md "Nodes that follow the log"; internal/
-- pagecache, splice.go "Deletions"). A node's rounds read the tombstones
-- above the feed position each of its feeds is at, with the additions;
-- to take a deleted submission out of a held page it needs the
-- submission's keyset position, (created_at, seq), which the tombstone
-- now keeps beside its feed position (of_pos). Tombstones made before
-- have NULLs there, and a node reads the pages they concern again.
--
-- And a deletion leaves the form's base (migration 0016) alone: it takes
-- the form's next feed position, for its tombstone, as an addition does,
-- so what changed since a page's head is still told by the feed
-- positions above it, each an addition or a tombstone. A reader that
-- reads only the additions (pgstore's splice statement) finds a position
-- without a row and reads the page again, as when base changed; updates,
-- TRUNCATE and inserts at other positions still change base.
--
-- Written to run again over itself. The functions run with this
-- migration's search_path.

ALTER TABLE formsapi_tombstones ADD COLUMN IF NOT EXISTS of_at bigint, ADD COLUMN IF NOT EXISTS of_seq bigint;

CREATE OR REPLACE FUNCTION formsapi_submissions_tombstone() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    pos bigint;
BEGIN
    UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE seq = OLD.form_seq RETURNING feed_last INTO pos;
    IF FOUND THEN
        INSERT INTO formsapi_tombstones (form_seq, feed_pos, of_pos, of_at, of_seq)
        VALUES (OLD.form_seq, pos, OLD.feed_pos, OLD.created_at, OLD.seq);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION formsapi_submissions_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE formsapi_forms SET version = formsapi_next_version()
    WHERE seq IN (SELECT form_seq FROM formsapi_old_rows);
    RETURN NULL;
END
$$;
