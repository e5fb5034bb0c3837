-- Refs that carry the incarnation (RELIABILITY case 101): a form deleted
-- and created again with the same ID starts its feed over at position 1,
-- and its refs (and the webhook-ids made from them) repeated the deleted
-- form's. A form made from now on gets an incarnation with its top bit
-- set (internal/token's RefIncarnation), and the refs of such a form
-- carry its incarnation: they are never another form's. Forms made
-- before keep their incarnations (0011 never set that bit), and so the
-- refs their consumers hold.
--
-- The same 62 random bits as 0011's, odd, with bit 63 set: as a signed
-- SQLite integer the value is negative; the store reads it as the
-- unsigned 64 bits.
DROP TRIGGER formsapi_forms_incarnation;

CREATE TRIGGER formsapi_forms_incarnation AFTER INSERT ON formsapi_forms WHEN NEW.incarnation = 0 BEGIN
    UPDATE formsapi_forms SET incarnation = ((random() & 9223372036854775806) + 1) | (1 << 63) WHERE seq = NEW.seq;
END;

-- The incarnation of the form an endpoint's stream has its cursor in
-- (hookstore.Stream.Incarnation): a dispatcher that finds the form of
-- another incarnation starts the stream over at the new form's first
-- entry. 0, for the streams written before, is an incarnation not known:
-- the dispatcher takes the form's current one, unless the cursor is past
-- that form's feed head, which only a cursor of another form can be.
ALTER TABLE formsapi_endpoint_streams ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;
