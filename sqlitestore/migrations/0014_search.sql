-- Search (q=<term>; see internal/find's search.go): find_keys now holds,
-- beside the keys of filters, the trigram keys of every value of a
-- submission (its strings at any depth, its numbers' text, its
-- attachments' file names), negative where the filters' are not: find.Key
-- changed with them, to keep the sign bit clear. Every row is indexed
-- again: its entries go (the update trigger removes those of the old
-- keys), and Open sets find_keys of each row without them, as it does
-- for rows stored before migration 0013, before it returns.
UPDATE formsapi_submissions SET find_keys = NULL WHERE find_keys IS NOT NULL;
