-- Search (q=<term>; see internal/find's search.go): find_keys now holds,
-- beside the keys of filters, the trigram keys of every value of a
-- submission (its strings at any depth, its numbers' text, its
-- attachments' file names), negative where the filters' are not: find.Key
-- changed with them, to keep the sign bit clear. Every row is indexed
-- again: 0017's update trigger removes the entries of its old keys, and
-- the store sets find_keys of each row without them in the migration's
-- transaction, as for rows stored before 0017. No extension is needed
-- (no pg_trgm, no unaccent): the writer computes the keys in Go.
UPDATE formsapi_submissions SET find_keys = NULL WHERE find_keys IS NOT NULL;
