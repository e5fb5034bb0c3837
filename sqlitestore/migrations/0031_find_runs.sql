-- The filters' index entries in runs: appended in sorted batches, not
-- inserted by every write at their keys' places (issue 37).
--
-- A write inserted one entry per top-level field into formsapi_find,
-- whose primary key begins with the key (a hash of the field and its
-- value): each entry landed on a page of its own, and every page a
-- commit dirties is a WAL frame. Counted frame by frame, those entries
-- were 4.6 of the 11.5 frames of a write with the search index off, and
-- the partial index of unsorted rows 1.1 more; every other frame was
-- one the write paid before the index of submitted values (BENCHMARKS.md,
-- "A write's WAL frames, counted").
--
-- Now a write adds nothing for the filters. A form's rows whose feed
-- position is above its find_folded are its unfolded tail, found through
-- the index of feed positions; rows an update gave new keys, or that
-- took a position at or below the mark, are put in formsapi_find_tail.
-- A fold (the write that brings the tail to 256 rows pays for it) reads
-- the tail's keys, writes the filters' entries as one new run, sorted by
-- (key, created_at, seq) and cut into chunks of entries, and moves the
-- mark, in one transaction, so a submission is in a run or in the tail
-- as any snapshot sees the file. Runs of one level are merged, eight at
-- a time, into one of the next (SQLite FTS5's segments, Lucene's): a run's
-- pages are written together, and an entry is written once per level.
-- A filtered page walks the key's entries in each run and the tail's
-- rows that hold the key, merged in keyset order, and checks every
-- submission against the filters, as it did.
--
-- A deletion, or an update that changes a row's filter keys, records
-- the row's old entries in formsapi_find_gone; the next fold of the
-- form, and the store's own deletions before they commit, take them out
-- of the runs. Until then a walk finds no submission at such an entry's
-- position (each entry's submission is looked up by seq and creation
-- time, and checked), so reads never see them.
--
-- Search's trigram entries keep their posting blocks (migration 0022);
-- their tail is the same tail, so a write with the search index on no
-- longer writes a row of formsapi_find_tail either.
ALTER TABLE formsapi_forms ADD COLUMN find_folded INTEGER NOT NULL DEFAULT 0;

-- filters: whether the row's filter entries are folded with it (0 for a
-- row whose update changed its trigram keys only).
ALTER TABLE formsapi_find_tail ADD COLUMN filters INTEGER NOT NULL DEFAULT 1;

CREATE TABLE formsapi_find_runs (
    form_seq INTEGER NOT NULL,
    run      INTEGER NOT NULL,
    key      INTEGER NOT NULL, -- the chunk's first entry: its key,
    lo_at    INTEGER NOT NULL, -- its created_at
    lo_seq   INTEGER NOT NULL, -- and its seq
    list     BLOB    NOT NULL, -- its entries, sorted: key, created_at and seq, 8 bytes each, big-endian
    PRIMARY KEY (form_seq, run, key, lo_at, lo_seq)
) WITHOUT ROWID;

CREATE TABLE formsapi_find_run_list (
    form_seq INTEGER NOT NULL,
    run      INTEGER NOT NULL,
    level    INTEGER NOT NULL,
    entries  INTEGER NOT NULL,
    PRIMARY KEY (form_seq, run)
) WITHOUT ROWID;

CREATE TABLE formsapi_find_gone (
    form_seq   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    keys       TEXT    NOT NULL -- JSON array of the filter keys whose entries go
);
CREATE INDEX formsapi_find_gone_form ON formsapi_find_gone (form_seq);

-- The entries the file holds become one run per form, in chunks of 128,
-- and every row is folded; rows waiting in the tail for their trigrams
-- keep their place there, their filter entries already in the run.
INSERT INTO formsapi_find_runs (form_seq, run, key, lo_at, lo_seq, list)
SELECT form_seq, 1, key, created_at, seq, list FROM (
    -- key, created_at and seq are those of the row of min(n): the
    -- chunk's first entry.
    SELECT form_seq, key, created_at, seq, min(n), CAST(group_concat(e, '' ORDER BY n) AS BLOB) AS list
    FROM (
        SELECT form_seq, key, created_at, seq, unhex(printf('%016x%016x%016x', key, created_at, seq)) AS e,
            row_number() OVER (PARTITION BY form_seq ORDER BY key, created_at, seq) AS n
        FROM formsapi_find
    )
    GROUP BY form_seq, (n - 1) / 128
);

-- Level 8: a run of its own, beside which later runs merge.
INSERT INTO formsapi_find_run_list (form_seq, run, level, entries)
SELECT form_seq, 1, 8, count(*) FROM formsapi_find GROUP BY form_seq;

UPDATE formsapi_forms SET find_folded = feed_last;
UPDATE formsapi_find_tail SET filters = 0;

DROP TRIGGER formsapi_find_insert;
DROP TRIGGER formsapi_find_update;
DROP TRIGGER formsapi_find_delete;
DROP TABLE formsapi_find;
DROP INDEX formsapi_submissions_unsorted;

-- A row that takes a feed position at or below its form's mark (a host
-- that moved feed_last back) is in the tail by its own row.
CREATE TRIGGER formsapi_find_insert AFTER INSERT ON formsapi_submissions
WHEN NEW.find_keys IS NOT NULL AND NEW.feed_pos > 0
    AND NEW.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = NEW.form_seq) BEGIN
    INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq) VALUES (NEW.form_seq, NEW.created_at, NEW.seq);
END;

CREATE TRIGGER formsapi_find_renumber AFTER UPDATE OF feed_pos ON formsapi_submissions
WHEN NEW.find_keys IS NOT NULL AND NEW.feed_pos > 0
    AND NEW.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = NEW.form_seq) BEGIN
    INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq) VALUES (NEW.form_seq, NEW.created_at, NEW.seq);
END;

-- An update of a row's keys or of its place (created_at, seq, form_seq:
-- a host's SQL) lists its old filter entries as gone when either
-- changed, takes its trigram entries out of their blocks, and puts the
-- row in the tail at its new place, with its filter entries when they
-- are to be folded again.
CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys, created_at, seq, form_seq ON formsapi_submissions BEGIN
    INSERT INTO formsapi_find_gone (form_seq, created_at, seq, keys)
    SELECT OLD.form_seq, OLD.created_at, OLD.seq, (SELECT json_group_array(value) FROM json_each(OLD.find_keys) WHERE value >= 0)
    WHERE OLD.find_keys IS NOT NULL
        AND EXISTS (SELECT 1 FROM formsapi_find_run_list WHERE form_seq = OLD.form_seq)
        AND ((OLD.created_at IS NOT NEW.created_at OR OLD.seq IS NOT NEW.seq OR OLD.form_seq IS NOT NEW.form_seq)
            OR (SELECT group_concat(value) FROM json_each(OLD.find_keys) WHERE value >= 0)
            IS NOT (SELECT group_concat(value) FROM json_each(coalesce(NEW.find_keys, '[]')) WHERE value >= 0));
    DELETE FROM formsapi_find_tail WHERE (OLD.created_at IS NOT NEW.created_at OR OLD.seq IS NOT NEW.seq OR OLD.form_seq IS NOT NEW.form_seq)
        AND form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq;
    DELETE FROM formsapi_find_blocks
    WHERE (form_seq, key, lo_at, lo_seq) IN (SELECT OLD.form_seq, j.value,
            (SELECT c.lo_at FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1),
            (SELECT c.lo_seq FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1)
        FROM json_each(coalesce(OLD.find_keys, '[]')) j WHERE j.value < 0)
        AND list = unhex(printf('%016x%016x', OLD.created_at, OLD.seq));
    UPDATE formsapi_find_blocks
    SET list = CAST(substr(list, 1, instr(list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) - 1)
        || substr(list, instr(list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) + 16) AS BLOB)
    WHERE (form_seq, key, lo_at, lo_seq) IN (SELECT OLD.form_seq, j.value,
            (SELECT c.lo_at FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1),
            (SELECT c.lo_seq FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1)
        FROM json_each(coalesce(OLD.find_keys, '[]')) j WHERE j.value < 0)
        AND instr(list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) % 16 = 1;
    INSERT INTO formsapi_find_tail (form_seq, created_at, seq, filters)
    SELECT NEW.form_seq, NEW.created_at, NEW.seq,
        OLD.find_keys IS NULL OR (OLD.created_at IS NOT NEW.created_at OR OLD.seq IS NOT NEW.seq OR OLD.form_seq IS NOT NEW.form_seq)
            OR (SELECT group_concat(value) FROM json_each(OLD.find_keys) WHERE value >= 0)
            IS NOT (SELECT group_concat(value) FROM json_each(coalesce(NEW.find_keys, '[]')) WHERE value >= 0)
    WHERE NEW.find_keys IS NOT NULL
    ON CONFLICT (form_seq, created_at, seq) DO UPDATE SET filters = max(filters, excluded.filters);
END;

CREATE TRIGGER formsapi_find_delete AFTER DELETE ON formsapi_submissions WHEN OLD.find_keys IS NOT NULL BEGIN
    INSERT INTO formsapi_find_gone (form_seq, created_at, seq, keys)
    SELECT OLD.form_seq, OLD.created_at, OLD.seq, (SELECT json_group_array(value) FROM json_each(OLD.find_keys) WHERE value >= 0)
    WHERE EXISTS (SELECT 1 FROM formsapi_find_run_list WHERE form_seq = OLD.form_seq);
    DELETE FROM formsapi_find_tail WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq;
    DELETE FROM formsapi_find_blocks
    WHERE (form_seq, key, lo_at, lo_seq) IN (SELECT OLD.form_seq, j.value,
            (SELECT c.lo_at FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1),
            (SELECT c.lo_seq FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1)
        FROM json_each(OLD.find_keys) j WHERE j.value < 0)
        AND list = unhex(printf('%016x%016x', OLD.created_at, OLD.seq));
    UPDATE formsapi_find_blocks
    SET list = CAST(substr(list, 1, instr(list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) - 1)
        || substr(list, instr(list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) + 16) AS BLOB)
    WHERE (form_seq, key, lo_at, lo_seq) IN (SELECT OLD.form_seq, j.value,
            (SELECT c.lo_at FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1),
            (SELECT c.lo_seq FROM formsapi_find_blocks c WHERE c.form_seq = OLD.form_seq AND c.key = j.value
                AND (c.lo_at, c.lo_seq) <= (OLD.created_at, OLD.seq) ORDER BY c.lo_at DESC, c.lo_seq DESC LIMIT 1)
        FROM json_each(OLD.find_keys) j WHERE j.value < 0)
        AND instr(list, unhex(printf('%016x%016x', OLD.created_at, OLD.seq))) % 16 = 1;
END;

-- A form that goes takes its runs; its submissions went before it, and
-- their entries with them.
CREATE TRIGGER formsapi_forms_runs_gone AFTER DELETE ON formsapi_forms BEGIN
    DELETE FROM formsapi_find_runs WHERE form_seq = OLD.seq;
    DELETE FROM formsapi_find_run_list WHERE form_seq = OLD.seq;
    DELETE FROM formsapi_find_gone WHERE form_seq = OLD.seq;
END;
