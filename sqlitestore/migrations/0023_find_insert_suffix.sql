-- A write's filter entries are read from the end of its find_keys only
-- (issue 37). find_keys is a JSON array of the row's index keys in
-- ascending order (the store's findKeys; holdsAnyKey relies on it too):
-- search's trigram keys, negative, come first, a hundred or more with the
-- search index on, and the filters' keys, not negative, after them. The
-- insert trigger of migration 0017 went through every key with json_each
-- to keep the few filter keys: some 6% of a write's CPU profile with
-- the search index on (BENCHMARKS.md, "The write's allocations and the
-- fold in two statements"). It now hands json_each the keys after the last
-- negative one: rtrim drops the digits, commas, spaces and the bracket
-- at the end, back to that key's '-'; what follows its digits and the
-- comma after them is the filter keys (or the bracket alone). A
-- find_keys without a negative key is read whole, as before. SQL of a
-- host's own that writes find_keys must keep them in ascending order,
-- as the store does.
DROP TRIGGER formsapi_find_insert;

CREATE TRIGGER formsapi_find_insert AFTER INSERT ON formsapi_submissions WHEN NEW.find_keys IS NOT NULL BEGIN
    INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
    SELECT NEW.form_seq, j.value, NEW.created_at, NEW.seq
    FROM json_each(CASE WHEN instr(NEW.find_keys, '-') = 0 THEN NEW.find_keys
        ELSE '[' || ltrim(ltrim(substr(NEW.find_keys, length(rtrim(NEW.find_keys, '0123456789,] ' || char(9, 10, 13))) + 1),
            '0123456789 ' || char(9, 10, 13)), ',') END) j
    WHERE j.value >= 0;
    INSERT OR IGNORE INTO formsapi_find_tail (form_seq, created_at, seq)
    SELECT NEW.form_seq, NEW.created_at, NEW.seq WHERE (SELECT o.value FROM formsapi_settings o WHERE o.name = 'search_index') = 1;
END;
