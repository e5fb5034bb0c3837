-- Search's trigram entries are folded into formsapi_find in batches, not
-- inserted by every write (issue 37). A write with the search index on
-- inserted each of its hundred or more trigram entries at its own place
-- in formsapi_find, each dirtying another page: it cost 21 times what a
-- write did before the index (bench/writecost.sh). Entries of many
-- writes share their trigrams' pages, so a batch of them, sorted, costs
-- a fraction of a page per entry.
--
-- While the search index is on, a write inserts its filter entries (the
-- non-negative keys) as before, and puts the submission in
-- formsapi_find_tail, the unfolded tail, instead of its trigram entries.
-- The insert into the tail that brings it to 64 rows folds the tail: the
-- trigram entries of every row in it are inserted, sorted, and the tail
-- is emptied, in the same transaction. So every committed submission has
-- either its trigram entries in formsapi_find or its row in the tail,
-- never both, and a search that walks a trigram's entries walks the
-- form's tail beside them, in the same statement and order, checking
-- each of its rows as it checks an entry's submission: it sees every
-- submission committed before it, and the tail adds at most 64 rows to
-- its walk. A filter walks its own entries, which every write still
-- inserts at once (deferring them too saved no CPU: the fold's work is
-- the same inserts).
--
-- An update of find_keys (the store's indexing of rows without them)
-- indexes the row's trigrams at once, as before, and takes it out of the
-- tail; a deletion takes its entries and its tail row. The tail is empty
-- while the search index is off (nothing is put in it), so turning the
-- index on, which indexes every stored row at once, finds it empty.
CREATE TABLE formsapi_find_tail (
    form_seq   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    PRIMARY KEY (form_seq, created_at, seq)
) WITHOUT ROWID;

DROP TRIGGER formsapi_find_insert;
DROP TRIGGER formsapi_find_update;
DROP TRIGGER formsapi_find_delete;

CREATE TRIGGER formsapi_find_insert AFTER INSERT ON formsapi_submissions WHEN NEW.find_keys IS NOT NULL BEGIN
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq FROM json_each(NEW.find_keys) j WHERE j.value >= 0;
    INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT NEW.form_seq, NEW.created_at, NEW.seq WHERE (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;

CREATE TRIGGER formsapi_find_fold AFTER INSERT ON formsapi_find_tail
WHEN (SELECT count(*) FROM formsapi_find_tail) >= 64 BEGIN
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT s.form_seq, j.value, s.created_at, s.seq
    FROM formsapi_find_tail t JOIN formsapi_submissions s ON s.seq = t.seq, json_each(s.find_keys) j
    WHERE j.value < 0
    ORDER BY 1, 2, 3, 4;
    DELETE FROM formsapi_find_tail;
END;

CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')));
    DELETE FROM formsapi_find_tail WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq;
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.find_keys, '[]')) j
    WHERE j.value >= 0 OR (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;

CREATE TRIGGER formsapi_find_delete AFTER DELETE ON formsapi_submissions WHEN OLD.find_keys IS NOT NULL BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(OLD.find_keys));
    DELETE FROM formsapi_find_tail WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq;
END;
