-- What another process changed, for the key copy (issue 38).
--
-- The key copy (keycopy.go) was emptied whenever another connection had
-- committed, since it could not tell what changed; a collection service
-- writing submissions from another process emptied it at every
-- submission, and every request looked its key up again. A new
-- submission changes only its form's version, and the forms that got
-- one since a round are those of the submissions whose seq is above the
-- highest the round saw (an insert takes the next seq). Every other
-- change a key lookup reads, the copy cannot find so: a key's hash,
-- account, grants, expiry or revocation (not its last use), a form
-- deleted or its ID, account, seq or incarnation changed, a submission
-- deleted or updated (a change to its form's version with no new seq).
-- Each of those moves formsapi_clock and sets keys_gen to it, in the
-- same transaction; a copy that finds keys_gen where it was keeps its
-- keys and reads again only the forms of the new submissions. keys_gen
-- moves with the clock's random steps (0010), so a value given again
-- after a restore is another but for one chance in 65,536. An insert
-- with a seq below the highest (only a host's SQL that names one) moves
-- it too.

INSERT OR IGNORE INTO formsapi_settings (name, value) VALUES ('keys_gen', 0);

CREATE TRIGGER formsapi_keys_gen_key_insert AFTER INSERT ON formsapi_keys BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_key_delete AFTER DELETE ON formsapi_keys BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_key_update AFTER UPDATE OF key_hash, account_id, revoked_at, forms, expires_at ON formsapi_keys BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_form_delete AFTER DELETE ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_form_update AFTER UPDATE OF seq, id, account_id, incarnation ON formsapi_forms BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_submission_delete AFTER DELETE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_submission_update AFTER UPDATE ON formsapi_submissions BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;

CREATE TRIGGER formsapi_keys_gen_submission_insert AFTER INSERT ON formsapi_submissions
WHEN EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq > NEW.seq) BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_settings SET value = (SELECT now FROM formsapi_clock WHERE id = 1) WHERE name = 'keys_gen';
END;
