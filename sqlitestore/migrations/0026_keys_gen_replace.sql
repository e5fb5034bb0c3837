-- keys_gen (0025) for the rows a REPLACE deletes.
--
-- INSERT OR REPLACE (and REPLACE, and an INSERT of a host's own ON
-- CONFLICT REPLACE) deletes the rows the new one conflicts with without
-- firing their AFTER DELETE triggers: SQLite fires them only with
-- recursive_triggers on, which no connection of this package or a host's
-- sets. So a host that wrote a form's row back whole (its incarnation
-- kept) gave the form to another account, or moved it to another seq,
-- without keys_gen moving, and a key copy kept answering for the old
-- form (TestKeyCopyReplace); a submission replaced at the highest seq
-- changed its form's version with no new seq and no keys_gen, and the
-- copy kept the old version, and the read cache the old page.
--
-- A BEFORE INSERT trigger still sees the rows the insert will replace:
-- when one is there, keys_gen moves. An insert without a seq has NEW.seq
-- -1 here, which no row of this package has. An INSERT OR IGNORE or an
-- UPSERT that conflicts moves it too, needlessly (the copy goes), and a
-- plain INSERT that conflicts fails with the trigger's changes.
--
-- The submission replaced also leaves its form's version where it was
-- (0010's delete trigger does not fire): when the new row is another
-- form's, the old form's pages stayed in every read cache, with or without
-- the copy (TestReplaceMovesSubmission). The trigger moves that version
-- too.

CREATE TRIGGER formsapi_keys_gen_form_replace BEFORE INSERT ON formsapi_forms
WHEN EXISTS (SELECT 1 FROM formsapi_forms WHERE id = NEW.id OR seq = NEW.seq) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_submission_replace BEFORE INSERT ON formsapi_submissions
WHEN EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq = NEW.seq) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq = (SELECT form_seq FROM formsapi_submissions WHERE seq = NEW.seq);
END;
