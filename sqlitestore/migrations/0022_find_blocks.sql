-- Search's trigram entries are kept as posting blocks, not one row each
-- (issue 37). Migration 0017 folded a write's hundred-odd trigram
-- entries in batches of 64 writes, but each entry was still a row of
-- formsapi_find: a fold inserted some 7,000 rows, each a B-tree descent,
-- and cost a write about 1 ms (8.4 times a write before the index).
--
-- formsapi_find_blocks holds, per form and trigram key, the key's
-- entries in blocks: each row is one block, named by its first entry
-- (lo_at, lo_seq), and list holds its entries, sorted by (created_at,
-- seq), 16 bytes each (created_at then seq, 8 bytes each, big-endian,
-- two's complement), at most 56 (a row within a page, no overflow). The
-- blocks of a key partition its keyset range: an entry is in the last
-- block whose first entry is at or before it, so a walk reads the blocks
-- in the order of their first entries and each block's list in order,
-- whatever order the entries were written in: a late commit (created_at
-- earlier than entries already folded) goes into the block of its place.
--
-- The fold is the store's (Go), no longer a trigger: the write that
-- finds 256 rows or more in formsapi_find_tail reads their trigram keys,
-- merges each key's new entries into the key's blocks (usually appending
-- to its last one), splits a block past 56 entries, and empties the tail,
-- in one transaction. So a fold of 256 writes updates one row per
-- distinct trigram of the batch, not one per entry. Until then a search reads the
-- tail beside the blocks, as before. formsapi_find keeps the filters'
-- entries (non-negative keys) only.
--
-- A deletion takes its entries out of their blocks here, in SQL (a
-- block left empty goes), so any connection may delete. An update of
-- find_keys (the store's indexing of rows without them) takes the old
-- keys' entries out the same way and puts the row in the tail while the
-- search index is on, which the store folds.
CREATE TABLE formsapi_find_blocks (
    form_seq INTEGER NOT NULL,
    key      INTEGER NOT NULL,
    lo_at    INTEGER NOT NULL,
    lo_seq   INTEGER NOT NULL,
    list     BLOB    NOT NULL,
    PRIMARY KEY (form_seq, key, lo_at, lo_seq)
) WITHOUT ROWID;

-- The trigram entries stored so far, 56 to a block.
WITH e AS (
    SELECT form_seq, key, created_at, seq,
        (row_number() OVER (PARTITION BY form_seq, key ORDER BY created_at, seq) - 1) / 56 AS b
    FROM formsapi_find WHERE key < 0
), f AS (
    SELECT form_seq, key, created_at, seq, b,
        first_value(created_at) OVER w AS lo_at, first_value(seq) OVER w AS lo_seq
    FROM e WINDOW w AS (PARTITION BY form_seq, key, b ORDER BY created_at, seq)
)
INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, list)
SELECT form_seq, key, lo_at, lo_seq, unhex(group_concat(printf('%016x%016x', created_at, seq), '' ORDER BY created_at, seq))
FROM f GROUP BY form_seq, key, b;

DELETE FROM formsapi_find WHERE key < 0;

DROP TRIGGER formsapi_find_fold;
DROP TRIGGER formsapi_find_update;
DROP TRIGGER formsapi_find_delete;

CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')) WHERE value >= 0);
    DELETE FROM formsapi_find_blocks WHERE form_seq = OLD.form_seq
        AND key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')) WHERE value < 0)
        AND (lo_at, lo_seq) = (OLD.created_at, OLD.seq)
        AND list = unhex(printf('%016x%016x', OLD.created_at, OLD.seq));
    UPDATE formsapi_find_blocks AS b
    SET list = CAST(substr(b.list, 1, instr(b.list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) - 1)
        || substr(b.list, instr(b.list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) + 16) AS BLOB)
    WHERE b.form_seq = OLD.form_seq
        AND b.key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')) WHERE value < 0)
        AND (b.lo_at, b.lo_seq) = (SELECT c.lo_at, c.lo_seq FROM formsapi_find_blocks c
            WHERE c.form_seq = OLD.form_seq AND c.key = b.key AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq)
            ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1)
        AND instr(b.list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) % 16 = 1;
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.find_keys, '[]')) j WHERE j.value >= 0;
    INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT NEW.form_seq, NEW.created_at, NEW.seq WHERE (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;

CREATE TRIGGER formsapi_find_delete AFTER DELETE ON formsapi_submissions WHEN OLD.find_keys IS NOT NULL BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(OLD.find_keys) WHERE value >= 0);
    DELETE FROM formsapi_find_tail WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq;
    DELETE FROM formsapi_find_blocks WHERE form_seq = OLD.form_seq
        AND key IN (SELECT value FROM json_each(OLD.find_keys) WHERE value < 0)
        AND (lo_at, lo_seq) = (OLD.created_at, OLD.seq)
        AND list = unhex(printf('%016x%016x', OLD.created_at, OLD.seq));
    UPDATE formsapi_find_blocks AS b
    SET list = CAST(substr(b.list, 1, instr(b.list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) - 1)
        || substr(b.list, instr(b.list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) + 16) AS BLOB)
    WHERE b.form_seq = OLD.form_seq
        AND b.key IN (SELECT value FROM json_each(OLD.find_keys) WHERE value < 0)
        AND (b.lo_at, b.lo_seq) = (SELECT c.lo_at, c.lo_seq FROM formsapi_find_blocks c
            WHERE c.form_seq = OLD.form_seq AND c.key = b.key AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq)
            ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1)
        AND instr(b.list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) % 16 = 1;
END;
