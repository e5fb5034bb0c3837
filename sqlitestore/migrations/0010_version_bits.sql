-- Versions that a restore cannot give again to another state. Copying an
-- older backup over the file (or restoring one into it with SQLite's
-- backup API) takes formsapi_clock back, and the counts after that point
-- would be given again, to other states of the same forms: a process
-- still holding a page read before the restore could take the new state
-- for the one it read (internal/pagecache). From here on each change
-- moves the clock by 1 plus a random number below 65,536, so a count given
-- again after a restore is another version but for one chance in 65,536.
-- Versions still grow, and the clock has room for about 2^47 changes.
--
-- The triggers are those of 0003 with the new step.

DROP TRIGGER formsapi_forms_insert;
DROP TRIGGER formsapi_forms_update;
DROP TRIGGER formsapi_submissions_insert;
DROP TRIGGER formsapi_submissions_update;
DROP TRIGGER formsapi_submissions_delete;

CREATE TRIGGER formsapi_forms_insert AFTER INSERT ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.seq;
END;

CREATE TRIGGER formsapi_forms_update AFTER UPDATE OF seq, id, account_id ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.seq;
END;

CREATE TRIGGER formsapi_submissions_insert AFTER INSERT ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = NEW.form_seq;
END;

CREATE TRIGGER formsapi_submissions_update AFTER UPDATE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq IN (OLD.form_seq, NEW.form_seq);
END;

CREATE TRIGGER formsapi_submissions_delete AFTER DELETE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET version = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE seq = OLD.form_seq;
END;
