-- Search's trigram index is opt-in (issue 27). Indexing every value's
-- trigrams costs each write about a hundred inserts at random places in
-- formsapi_find (bench/writecost.sh: AddSubmission 0.56 -> 6.9 ms), which
-- every host paid whether anyone searched or not. Whether the index holds
-- trigram entries is now a setting kept here, in the database, so every
-- process over the file agrees and none can leave the index incomplete:
-- off by default, turned on by a store opened with WithSearchIndex, which
-- in the same transaction indexes the trigrams of every stored row. The
-- writers still put every key in find_keys (filters' and trigrams'); the
-- triggers copy a trigram key (negative) into formsapi_find only while
-- the setting is on. Searches walk the form's submissions while it is off.
--
-- The trigram entries stored so far are deleted: with the setting off
-- they would go stale (rows added later lack theirs) and take space for
-- nothing. This reads the whole of formsapi_find once.
CREATE TABLE formsapi_settings (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO formsapi_settings (name, value) VALUES ('search_index', 0);

DROP TRIGGER formsapi_find_insert;
DROP TRIGGER formsapi_find_update;

CREATE TRIGGER formsapi_find_insert AFTER INSERT ON formsapi_submissions WHEN NEW.find_keys IS NOT NULL BEGIN
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq FROM json_each(NEW.find_keys) j
    WHERE j.value >= 0 OR (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;

CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')));
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.find_keys, '[]')) j
    WHERE j.value >= 0 OR (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;

DELETE FROM formsapi_find WHERE key < 0;
