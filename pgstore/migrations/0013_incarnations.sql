-- A form's incarnation: a random value, never 0, that a form keeps for
-- its life, so that a form deleted and created again with the same ID is
-- told from the one before, on every node. The handler seals it into
-- cursors and sync tokens and answers 410 to one of another incarnation
-- than the form's, so a consumer of the old form's feed starts over
-- rather than skip the new form's first submissions. The volatile
-- default gives every existing form a value of its own, and every new
-- one, whoever inserts it: about 53 random bits (random()'s precision).
ALTER TABLE formsapi_forms
    ADD COLUMN incarnation bigint NOT NULL DEFAULT (floor(random() * 4611686018427387903) + 1)::bigint;
