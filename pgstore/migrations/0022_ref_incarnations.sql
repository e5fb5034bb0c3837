-- Refs that carry the incarnation (RELIABILITY case 101): a form deleted
-- and created again with the same ID starts its feed over at position 1,
-- and its refs (and the webhook-ids made from them) repeated the deleted
-- form's. A form made from now on gets an incarnation with its top bit
-- set (internal/token's RefIncarnation), and the refs of such a form
-- carry its incarnation: they are never another form's. Forms made
-- before keep their incarnations (0013's are below 2^62), and so the
-- refs their consumers hold.
--
-- The same random bits as 0013's, with bit 63 set: as a bigint the value
-- is negative; the store reads it as the unsigned 64 bits.
ALTER TABLE formsapi_forms
    ALTER COLUMN incarnation SET DEFAULT ((floor(random() * 4611686018427387903) + 1)::bigint | (1::bigint << 63));

-- The incarnation of the form an endpoint's stream has its cursor in
-- (hookstore.Stream.Incarnation): a dispatcher that finds the form of
-- another incarnation starts the stream over at the new form's first
-- entry. 0, for the streams written before, is an incarnation not known:
-- the dispatcher takes the form's current one, unless the cursor is past
-- that form's feed head, which only a cursor of another form can be. A
-- node of an earlier version, during a rolling deploy, leaves the column
-- as it was when it moves a cursor.
ALTER TABLE formsapi_endpoint_streams ADD COLUMN IF NOT EXISTS incarnation bigint NOT NULL DEFAULT 0;
