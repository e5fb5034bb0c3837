-- A posting block left empty by a deletion goes, whatever its name
-- (issue 37). Migration 0022's triggers deleted a block only when its
-- list was exactly the deleted entry and its name (lo_at, lo_seq) was
-- that entry: a block whose first entry went before its others (oldest
-- first, as a retention purge deletes) kept its name, and its row stayed
-- once its list was empty, read again by every search and probe of its
-- trigram. A block's name is the lower bound of its entries, no longer
-- always one of them: a key's blocks still partition its keyset range
-- (an entry is in the last block whose first entry, or name, is at or
-- before it), and the fold and the walks rely on nothing more.
--
-- The triggers find the block of the row's entry for each of its
-- trigram keys by one descent of the primary key each ((lo_at, lo_seq)
-- of the last block at or before the entry, in a list the statement
-- reads once) and write it through its whole primary key: 0022's
-- statements compared each block of each key with that descent, a
-- deletion reading every block of its trigrams. The block whose list
-- is the entry alone is deleted; otherwise the entry is cut out of its
-- block's list.
DROP TRIGGER formsapi_find_update;
DROP TRIGGER formsapi_find_delete;

CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys ON formsapi_submissions BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(coalesce(OLD.find_keys, '[]')) WHERE value >= 0);
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
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq FROM json_each(coalesce(NEW.find_keys, '[]')) j WHERE j.value >= 0;
    INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT NEW.form_seq, NEW.created_at, NEW.seq WHERE (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;

CREATE TRIGGER formsapi_find_delete AFTER DELETE ON formsapi_submissions WHEN OLD.find_keys IS NOT NULL BEGIN
    DELETE FROM formsapi_find WHERE form_seq = OLD.form_seq AND created_at = OLD.created_at AND seq = OLD.seq
        AND key IN (SELECT value FROM json_each(OLD.find_keys) WHERE value >= 0);
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

-- The blocks 0022's triggers left empty.
DELETE FROM formsapi_find_blocks WHERE length(list) < 16;
