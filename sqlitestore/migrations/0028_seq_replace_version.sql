-- A form's version for the submission an UPDATE OR REPLACE of another's
-- seq deletes.
--
-- A host's UPDATE OR REPLACE that gives a submission the seq of another
-- deletes that other without its delete trigger (SQLite fires it only
-- with recursive_triggers on), so its form's version (0010) stayed, and
-- every read cache kept the form's page with the deleted submission in
-- it (TestUpdateReplaceSeqTakesSubmission). 0010's update trigger moves
-- the versions of the updated row's forms only, and 0025's moves keys_gen;
-- a BEFORE UPDATE trigger still sees the row to be replaced, and moves
-- its form's version. (An INSERT OR REPLACE is 0026's; a conflict on
-- the other unique indexes, (form_seq, feed_pos) and (form_seq,
-- host_id), is with a submission of the form whose version the update
-- moves.)

CREATE TRIGGER formsapi_submissions_seq_replace BEFORE UPDATE OF seq ON formsapi_submissions
WHEN NEW.seq IS NOT OLD.seq AND EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq = NEW.seq) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq = (SELECT form_seq FROM formsapi_submissions WHERE seq = NEW.seq);
END;
