-- A submission's metadata ID found by its index, not by a walk of its
-- form.
--
-- The index on (form_seq, host_id) is partial (WHERE host_id <> ''), and
-- SQLite uses a partial index only for a lookup whose WHERE states the
-- index's condition: "host_id = NEW.host_id" alone does not, so 0029's
-- check walked every submission of the form on the index of feed
-- positions. Every write that gave a metadata ID paid a read of its whole
-- form (a seed of 1,200 such writes to one form cost four times what it
-- did before 0029). The same lookup with the condition stated seeks the
-- index (TestTriggerLookupsSeek).

DROP TRIGGER formsapi_submissions_replace_base;

CREATE TRIGGER formsapi_submissions_replace_base BEFORE INSERT ON formsapi_submissions
WHEN EXISTS (SELECT 1 FROM formsapi_submissions WHERE seq = NEW.seq)
    OR EXISTS (SELECT 1 FROM formsapi_submissions WHERE form_seq = NEW.form_seq AND feed_pos = NEW.feed_pos)
    OR NEW.host_id <> '' AND EXISTS (SELECT 1 FROM formsapi_submissions WHERE form_seq = NEW.form_seq AND host_id = NEW.host_id AND host_id <> '') BEGIN
    UPDATE formsapi_clock SET now = now + 1 + (random() & 65535) WHERE id = 1;
    UPDATE formsapi_forms SET base = (SELECT now FROM formsapi_clock WHERE id = 1)
    WHERE seq IN (NEW.form_seq, (SELECT form_seq FROM formsapi_submissions WHERE seq = NEW.seq));
END;
