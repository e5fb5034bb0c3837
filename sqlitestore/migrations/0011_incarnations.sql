-- A form's incarnation: a random value, never 0, that a form keeps for
-- its life, so that a form deleted and created again with the same ID is
-- told from the one before. The handler seals it into cursors and sync
-- tokens and answers 410 to one of another incarnation than the form's,
-- so a consumer of the old form's feed starts over rather than skip the
-- new form's first submissions. SQLite cannot add a column with a
-- random default: existing forms get theirs here, and the trigger gives
-- each new form one, whoever inserts it. (random() & 0x7ffffffffffffffe)
-- + 1 is odd and positive: 62 random bits.

ALTER TABLE formsapi_forms ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;

UPDATE formsapi_forms SET incarnation = (random() & 9223372036854775806) + 1;

CREATE TRIGGER formsapi_forms_incarnation AFTER INSERT ON formsapi_forms WHEN NEW.incarnation = 0 BEGIN
    UPDATE formsapi_forms SET incarnation = (random() & 9223372036854775806) + 1 WHERE seq = NEW.seq;
END;
