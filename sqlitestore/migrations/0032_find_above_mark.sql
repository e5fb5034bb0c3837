-- A row above its form's mark is in the tail by its place and was never
-- folded: 0031's update trigger listed it in formsapi_find_tail too and
-- its old entries as gone. The explicit rows counted twice in the tail's
-- count, and turning the search index on (whose indexing of the rows
-- updates their keys) left every form's tail in formsapi_find_tail:
-- the first write to each form after it then folded twice the rows it
-- needed (a writer over 200 forms of 500 rows ran at 340 writes a
-- second against 440 before 0031, bench/mixed.sh). Now the trigger
-- lists and queues only rows at or below their form's mark.
DROP TRIGGER formsapi_find_update;

CREATE TRIGGER formsapi_find_update AFTER UPDATE OF find_keys, created_at, seq, form_seq ON formsapi_submissions BEGIN
    INSERT INTO formsapi_find_gone (form_seq, created_at, seq, keys)
    SELECT OLD.form_seq, OLD.created_at, OLD.seq, (SELECT json_group_array(value) FROM json_each(OLD.find_keys) WHERE value >= 0)
    WHERE OLD.find_keys IS NOT NULL
        AND OLD.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = OLD.form_seq)
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
        AND NEW.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = NEW.form_seq)
    ON CONFLICT (form_seq, created_at, seq) DO UPDATE SET filters = max(filters, excluded.filters);
END;
