-- keys_gen (0025) for a restore by SQL.
--
-- A host that shares the file may restore only the library's tables from
-- a copy (VACUUM INTO, an attached backup), by SQL: the backup API would
-- take its own tables back too. Its INSERT or UPDATE of formsapi_settings
-- then puts keys_gen back where a key copy may have seen it, and the
-- highest seq back too; once new submissions bring that seq to where
-- the copy last saw it, the copy found nothing moved and kept the
-- versions of forms whose submissions the restore undid, and the read
-- cache their pages (TestKeyCopySQLRestore).
--
-- keys_gen is written only by 0025's triggers, each right after it moves
-- formsapi_clock, with the clock's value. Any other write of its row (an
-- insert, or an update to another value) moves the clock and sets it
-- there, as a change of keys does. 0025's triggers, whose update sets
-- the clock's value, do not fire this one; nor does it fire itself
-- (recursive_triggers is off).

CREATE TRIGGER formsapi_keys_gen_set_insert AFTER INSERT ON formsapi_settings
WHEN NEW.name = 'keys_gen' BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_set_update AFTER UPDATE ON formsapi_settings
WHEN NEW.name = 'keys_gen' AND NEW.value IS NOT (SELECT now FROM formsapi_clock WHERE id = 1) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;
